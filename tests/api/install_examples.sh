#!/usr/bin/env bash
# Installs a build into a temporary prefix, then builds examples/ against the
# installed copy only, as an outside program would: the C example with
# pkg-config, the C++ example with find_package(tokamak). Both generate from
# stories260K with greedy sampling; their text must equal `tokamak run`'s.
#   tests/api/install_examples.sh BUILD_DIR
# TOKAMAK_TEST_DATA: the shared data folder (default: ../shared beside the checkout).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:?usage: tests/api/install_examples.sh BUILD_DIR}")
data=$(realpath -m "${TOKAMAK_TEST_DATA:-$repo/../shared}")
model=$data/models/stories260K/stories260K.gguf
[ -f "$model" ] || { echo "install_examples: no model at $model (TOKAMAK_TEST_DATA '$data')" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
libdir=$(dirname "$(dirname "$(find "$prefix" -name tokamak.pc -print -quit)")")
export PKG_CONFIG_PATH=$libdir/pkgconfig LD_LIBRARY_PATH=$libdir
# The soname carries the version; libtokamak.so is the link-time name.
soname=$(objdump -p "$libdir/libtokamak.so" | awk '$1 == "SONAME" { print $2 }')
[[ $soname == libtokamak.so.* ]] || { echo "install_examples: soname '$soname' has no version" >&2; exit 1; }

# The reference: the installed command line, greedy.
run() { "$prefix/bin/tokamak" run -m "$model" -p "$1" -n "$2" --temp 0 2> /dev/null; }

# C, with pkg-config: 32 tokens, then the finish reason.
# shellcheck disable=SC2046  # pkg-config's flags are separate words
cc -std=c11 -Wall -Wextra -Werror "$repo/examples/c/generate.c" $(pkg-config --cflags --libs tokamak) -o "$work/generate"
got=$("$work/generate" "$model" "Once upon a time")
want="$(run "Once upon a time" 32)"$'\n'"[finish: length]"
[ "$got" = "$want" ] || { printf 'install_examples: the C example printed\n%s\nexpected\n%s\n' "$got" "$want" >&2; exit 1; }

# C++, with find_package(tokamak) from the prefix alone: a batch of two, 24 tokens each.
cmake -S "$repo/examples/cpp" -B "$work/cpp" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log"
cmake --build "$work/cpp" > "$work/build.log"
got=$("$work/cpp/batch" "$model" "Once upon a time" "The cat")
want=$(printf '[0] %s%s  (24 tokens, length)\n[1] %s%s  (24 tokens, length)' \
  "Once upon a time" "$(run "Once upon a time" 24)" "The cat" "$(run "The cat" 24)")
[ "$got" = "$want" ] || { printf 'install_examples: the C++ example printed\n%s\nexpected\n%s\n' "$got" "$want" >&2; exit 1; }
echo "install_examples: the C (pkg-config) and C++ (find_package) examples print what tokamak run prints"
