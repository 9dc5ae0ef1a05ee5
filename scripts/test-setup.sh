#!/usr/bin/env bash
# Installs the Debian packages the test suite drives, when they are missing and this user
# may (root, or passwordless sudo). `npm test` runs it first, and .ci/run runs `npm test`:
# this list is the only one. Otherwise it names what is missing and which tests need it,
# and the suite runs anyway (those tests fail saying what is missing).
#
#   package     command   needed by
#   chromium    chromium  test/monitor/board.test.ts (the board in headless Chromium; no browser is downloaded)
#   xvfb        Xvfb      test/tools/desktop.test.ts, test/workers/desktop-daemon.test.ts (a virtual display)
#   xdotool     xdotool   the desktop tests (type_text beyond ASCII; saving the editor)
#   mousepad    mousepad  the desktop tests (the small editor they drive)
#   prometheus  promtool  test/monitor/metrics.test.ts (promtool check metrics over /metrics)
#   pgbouncer   pgbouncer test/pg/pooler.test.ts (taskloop behind a pooler in transaction mode)
#
# TASKLOOP_TEST_SETUP=skip skips it.
set -uo pipefail
[ "${TASKLOOP_TEST_SETUP:-}" = skip ] && exit 0

packages=(chromium xvfb xdotool mousepad prometheus pgbouncer)
commands=(chromium Xvfb xdotool mousepad promtool pgbouncer)
missing=()
for i in "${!packages[@]}"; do
  command -v "${commands[$i]}" >/dev/null 2>&1 || [ -x "/usr/bin/${commands[$i]}" ] || [ -x "/usr/sbin/${commands[$i]}" ] || missing+=("${packages[$i]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root=(sudo -n); else as_root=(none); fi
fi
if [ "${as_root[0]:-}" = none ] || ! command -v apt-get >/dev/null 2>&1; then
  {
    echo "test-setup: missing Debian packages: ${missing[*]}"
    echo "  install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}"
    echo "  (this user cannot: not root, no passwordless sudo, or no apt-get)."
    echo "  Without them these tests fail: chromium → test/monitor/board.test.ts; xvfb, xdotool, mousepad →"
    echo "  test/tools/desktop.test.ts and test/workers/desktop-daemon.test.ts; prometheus (promtool) → test/monitor/metrics.test.ts; pgbouncer → test/pg/pooler.test.ts"
  } >&2
  exit 0
fi
echo "test-setup: installing ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >&2 && "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || {
  echo "test-setup: apt-get could not install ${missing[*]}; the tests that need them will fail" >&2
  exit 0
}
