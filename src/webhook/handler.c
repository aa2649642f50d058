/*
 * handler.c - the lookup's defaults.
 */
#include "webhook/handler.h"

#include <string.h>

void tsr_webhook_lookup_init(struct tsr_webhook_lookup *l)
{
        memset(l, 0, sizeof(*l));
        tsr_settings_defaults(&l->settings);
}
