#!/bin/sh
# The Docker image's dependency check (Dockerfile): `pip check` before and after the project's
# requirements are installed.
#
#   pip-check.sh record FILE    write the base image's own conflicts to FILE (never fails)
#   pip-check.sh compare FILE   fail on each conflict not in FILE: one the project's install
#                               caused (a version it pinned, changed or added breaks another
#                               package's requirement); the base image's own are listed only
#
# pip install resolves only what it installs, and exits 0 even when the versions it chose
# break a package already in the image; pip check sees the whole environment.
set -eu
action="${1:?usage: pip-check.sh record|compare FILE}"
known="${2:?usage: pip-check.sh record|compare FILE}"
case "$action" in
    record)
        pip check > "$known" 2>&1 || true
        grep -q -v '^No broken requirements found' "$known" || : > "$known"
        ;;
    compare)
        found="$(mktemp)"
        if pip check > "$found" 2>&1; then
            echo "pip check: no broken requirements"
            rm -f "$found"
            exit 0
        fi
        new="$(grep -v -x -F -f "$known" "$found" || true)"
        if [ -s "$known" ]; then
            grep -x -F -f "$found" "$known" \
                | sed 's/^/pip check, the base image'"'"'s own (not caused by this project): /' || true
        fi
        rm -f "$found"
        if [ -n "$new" ]; then
            echo "pip check: the project's requirements (requirements-runtime.txt, constraints.txt) break packages of the image:" >&2
            echo "$new" | sed 's/^/  /' >&2
            echo "Change a pin in requirements-runtime.txt / constraints.txt, or leave the conflicting package out of the base image." >&2
            exit 1
        fi
        ;;
    *)
        echo "pip-check.sh: unknown action $action (record or compare)" >&2
        exit 2
        ;;
esac
