"""``scontrol show hostnames|hostlist`` inside a live job (scripts use it to find their nodes)."""
from __future__ import annotations

import os
import sys

from gpupool.formats.hostlist import HostlistError, compress_hostlist, expand_hostlist


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "show" and argv[1] in ("hostnames", "hostname", "hostlist"):
        text = argv[2] if len(argv) > 2 else os.environ.get("SLURM_JOB_NODELIST", "")
        try:
            if argv[1] == "hostlist":
                print(compress_hostlist(text.split(",")))
            else:
                for name in expand_hostlist(text):
                    print(name)
        except HostlistError as exc:
            print(f"scontrol: error: {exc}", file=sys.stderr)
            return 1
        return 0
    print("scontrol: gpupool's live jobs support only 'show hostnames' and 'show hostlist'", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
