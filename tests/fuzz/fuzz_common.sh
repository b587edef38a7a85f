# Sourced by run_fuzz.sh and run_fuzz_data.sh (not run on its own): their command line, the clang++ they need
# with the sanitizers' flags, and the parallel compilation of sources into objects.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/fuzz_common.sh" DEFAULT_SECONDS "$@"
#
# sets `script` (the caller's name), `here` (tests/fuzz), `root` (the repository), `build` (BUILD_DIR, made and
# absolute), `cxx` (FUZZ_CXX, default clang++), `seconds` (FUZZ_SECONDS, default DEFAULT_SECONDS) and `flags`.

script="$(basename "$0")"
fuzz_default_seconds="$1"
shift
if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(mkdir -p "$1" && cd "$1" && pwd)"
cxx="${FUZZ_CXX:-clang++}"
seconds="${FUZZ_SECONDS:-$fuzz_default_seconds}"

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "$script: FAILED: $cxx not found; the fuzz targets need clang++ with libFuzzer (Debian: apt-get install clang)" >&2
  exit 1
fi

flags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -DFMT_HEADER_ONLY -I"$root")

# library_sources FOLDER: the .cpp files of the add_library(...) in FOLDER/CMakeLists.txt, so that a target
# links a library as the build has it (a new source file in it needs no change in the fuzz scripts).
library_sources() {
  sed -n '/^add_library(/,/)/p' "$root/$1/CMakeLists.txt" | grep -oE '[A-Za-z0-9_/]+\.cpp' | sed "s|^|$root/$1/|"
}

# compile_objects PREFIX NEWEST SOURCE...: compiles each SOURCE into BUILD_DIR/obj/PREFIX<its name>.o, as many
# compilers at once as there are cores. An object newer than its source and than NEWEST (the newest file it
# may depend on: the headers, the calling script) is reused. Sets `objects` to the objects in SOURCE order;
# exits 1 naming every source that did not compile.
compile_objects() {
  local prefix="$1" newest="$2" source object
  shift 2
  local failed="$build/obj/.failed"
  mkdir -p "$build/obj"
  rm -f "$failed"
  objects=()
  for source in "$@"; do
    object="$build/obj/$prefix$(basename "$source" .cpp).o"
    objects+=("$object")
    if [[ -f "$object" && "$object" -nt "$source" && "$object" -nt "$newest" ]]; then continue; fi
    rm -f "$object"
    { "$cxx" "${flags[@]}" -c "$source" -o "$object" || echo "$source" >> "$failed"; } &
    while [[ $(jobs -rp | wc -l) -ge $(nproc) ]]; do wait -n || true; done
  done
  wait
  if [[ -s "$failed" ]]; then
    echo "$script: FAILED: compiling for the fuzz targets: $(tr '\n' ' ' < "$failed")" >&2
    exit 1
  fi
}
