#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""conf_loops.py FILE N: gives the gateway configuration FILE `"loops": N` in its "gateway"
object, unless it sets loops itself (a suite that chose its loops keeps them). The file is
edited as text, one insertion, so the rest stays byte for byte what the suite wrote (suites
edit their files with sed later). A file that is not a JSON object (a deliberately broken one)
is left alone. Used for ISERGW_LOOPS by tests/lib/common.sh (t_daemon_start) and the VM rig's
guest (tests/vm/guest/lib.sh, vm_gw_start). Exit 0 when FILE now has (or had) its loops."""
import json
import re
import sys


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    try:
        text = open(path).read()
        conf = json.loads(text)
    except (OSError, ValueError):
        return 0
    if not isinstance(conf, dict):
        return 0
    gw = conf.get("gateway")
    if isinstance(gw, dict) and "loops" in gw:
        return 0
    if isinstance(gw, dict):
        m = re.search(r'"gateway"\s*:\s*\{', text)
        if not m:
            return 0
        rest = text[m.end():]
        sep = "" if rest.lstrip().startswith("}") else ", "
        new = text[:m.end()] + ' "loops": %d%s' % (n, sep) + rest
    else:
        m = re.search(r"\{", text)
        rest = text[m.end():]
        sep = "" if rest.lstrip().startswith("}") else ","
        new = text[:m.end()] + ' "gateway": { "loops": %d }%s' % (n, sep) + rest
    try:
        if json.loads(new).get("gateway", {}).get("loops") != n:
            return 1
    except ValueError:
        return 1
    with open(path, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
