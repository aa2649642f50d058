#!/bin/sh
# bench/run.sh [BUILD_DIR] [bench_webhook options...] - THE command to run the webhook benchmark.
#
# Makes a throwaway EC P-256 CA and a leaf for the webhook's Service name
# (DNS:gpustack-worker-webhook.gpustack-system.svc, IP:127.0.0.1) with openssl in a temporary
# directory, builds BUILD_DIR (default: build; set up with meson when missing), and runs
# bench_webhook with them. Further arguments go to bench_webhook, for example
#   bench/run.sh build --seconds 5 --concurrency 1,8,32 --threads 8
set -eu
. "$(dirname "$0")/common.sh"
bench_build "${1:-build}" bench/bench_webhook
[ $# -gt 0 ] && shift

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
(
	cd "$tmp"
	ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>>openssl.log; }
	ec ca.key
	openssl req -x509 -new -key ca.key -out ca.crt -days 1 -subj "/CN=tessera-bench-ca" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>>openssl.log
	ec tls.key
	openssl req -new -key tls.key -out tls.csr \
		-subj "/CN=gpustack-worker-webhook.gpustack-system.svc" 2>>openssl.log
	printf '%s\n' \
		'subjectAltName=DNS:gpustack-worker-webhook.gpustack-system.svc,IP:127.0.0.1' \
		'extendedKeyUsage=serverAuth' 'keyUsage=critical,digitalSignature' \
		'basicConstraints=CA:FALSE' >tls.ext
	openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -set_serial 2 -days 1 \
		-extfile tls.ext -out tls.crt 2>>openssl.log
) || { cat "$tmp/openssl.log" >&2; exit 1; }

"$build/bench/bench_webhook" --cert "$tmp/tls.crt" --key "$tmp/tls.key" --ca "$tmp/ca.crt" "$@"
