"""tap.py - the TAP output the cluster suites share: numbered ok / not ok lines with the detail of a
failure as comments, a plan at the end, and the exit status meson reads.

    t = Tap(); t.ok(cond, "what was checked", detail); ...; sys.exit(t.done())
An exception in a suite is reported by t.crash() as one failed check with its traceback.
"""
import traceback


class Tap:
    def __init__(self):
        self.results = []

    def ok(self, cond, name, detail=""):
        self.results.append(bool(cond))
        print("%s %d - %s" % ("ok" if cond else "not ok", len(self.results), name), flush=True)
        if not cond and detail:
            for line in str(detail).splitlines()[:60]:
                print("#   " + line, flush=True)
        return bool(cond)

    def skip(self, name, why):
        self.results.append(True)
        print("ok %d - %s # SKIP %s" % (len(self.results), name, why), flush=True)

    def note(self, text):
        for line in str(text).splitlines():
            print("# " + line, flush=True)

    def crash(self, what):
        self.ok(False, "%s: the suite raised" % what, traceback.format_exc())

    def failed(self):
        return not all(self.results)

    def done(self):
        print("1..%d" % len(self.results), flush=True)
        return 1 if self.failed() or not self.results else 0


def on_control_plane(t, suite, body, **options):
    """Runs body(cp) on a fresh ControlPlane(suite, **options): its start-up time is noted, an
    exception from the start-up or the body is one failed check with its traceback, a tessera
    daemon (daemons.py) that ended on its own meanwhile is one failed check showing why, and the
    control plane is stopped, keeping its logs when any check of t failed."""
    from controlplane import ControlPlane
    import daemons

    failed = True
    cp = ControlPlane(suite, **options)
    mark = len(daemons.STARTED)
    try:
        cp.start()
        t.note("control plane up in %.1f s (%s)" % (cp.timings["total"], ", ".join(
            "%s %.1f s" % kv for kv in cp.timings.items() if kv[0] != "total")))
        body(cp)
    except Exception:  # noqa: BLE001 - reported as a failed check
        t.crash(suite)
    finally:
        died = daemons.died_since(mark)
        t.ok(not died, "no tessera daemon ended on its own (a crash, a sanitizer's report)",
             "\n".join("%s exited %s:\n%s" % (" ".join(d.argv[1:2]), d.died(),
                                               d.crash_report()) for d in died))
        failed = t.failed()
        cp.stop(failed=failed)
