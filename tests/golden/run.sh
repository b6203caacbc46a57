#!/bin/sh
# Golden tests of the frontend: every accept/NAME.tex must compile (exit 0)
# and print exactly accept/NAME.te with --emit=te; every reject/NAME.tex
# must fail with exit status 1, print nothing on stdout and exactly
# reject/NAME.err on stderr. dcc runs inside each directory, so the paths in
# messages are the bare file names.
#
#   tests/golden/run.sh DCC             check; a unified diff per mismatch
#   tests/golden/run.sh --update DCC    rewrite the expectations (humans only)
set -u

update=0
if [ "${1:-}" = "--update" ]; then
    update=1
    shift
fi
if [ $# -ne 1 ]; then
    echo "usage: $0 [--update] DCC_BINARY" >&2
    exit 2
fi
case $1 in
/*) dcc=$1 ;;
*) dcc=$(pwd)/$1 ;;
esac
if [ ! -x "$dcc" ]; then
    echo "$0: $dcc is not an executable" >&2
    exit 2
fi

here=$(cd "$(dirname "$0")" && pwd)
# a hang is a failure too, where timeout(1) exists
limit=
if command -v timeout >/dev/null 2>&1; then limit="timeout 30"; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dcc-golden.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

bad() {
    echo "FAIL: $1"
    fail=$((fail + 1))
}

# check_one DIR NAME: runs dcc on DIR/NAME.tex and compares.
check_one() {
    dir=$1 name=$2
    if [ "$dir" = accept ]; then ext=te; want_rc=0; else ext=err; want_rc=1; fi
    exp=$name.$ext
    (cd "$here/$dir" && $limit "$dcc" "$name.tex" --emit=te >"$tmp/out" 2>"$tmp/err")
    rc=$?
    if [ "$dir" = accept ]; then got=$tmp/out; other=$tmp/err; else got=$tmp/err; other=$tmp/out; fi
    if [ $update -eq 1 ]; then
        if [ $rc -ne $want_rc ]; then
            bad "$dir/$name.tex: exit status $rc, expected $want_rc; not updated"
            cat "$tmp/err"
            return
        fi
        cp "$got" "$here/$dir/$exp"
        pass=$((pass + 1))
        return
    fi
    if [ ! -f "$here/$dir/$exp" ]; then
        bad "$dir/$name.tex has no $dir/$exp"
        return
    fi
    ok=1
    if [ $rc -ne $want_rc ]; then
        echo "$dir/$name.tex: exit status $rc, expected $want_rc"
        ok=0
    fi
    if [ -s "$other" ]; then
        if [ "$dir" = accept ]; then echo "$dir/$name.tex: unexpected stderr:"; else echo "$dir/$name.tex: unexpected stdout:"; fi
        cat "$other"
        ok=0
    fi
    if ! diff -u --label "$dir/$exp" --label "$dir/$exp (got)" "$here/$dir/$exp" "$got"; then
        ok=0
    fi
    if [ $ok -eq 1 ]; then
        pass=$((pass + 1))
    else
        bad "$dir/$name.tex"
    fi
}

for dir in accept reject; do
    for tex in "$here/$dir"/*.tex; do
        [ -e "$tex" ] || continue
        name=$(basename "$tex" .tex)
        check_one "$dir" "$name"
    done
    # an expectation without its program is a leftover
    for exp in "$here/$dir"/*.te "$here/$dir"/*.err; do
        [ -e "$exp" ] || continue
        base=${exp%.*}
        [ -f "$base.tex" ] || bad "$dir/$(basename "$exp") has no .tex"
    done
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
