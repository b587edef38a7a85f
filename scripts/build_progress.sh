#!/usr/bin/env bash
# Turns Ninja's output (one "[done/total seconds] Building CXX object dir/CMakeFiles/target.dir/file.cpp.o"
# line per step; NINJA_STATUS="[%f/%t %e] ") into short progress for scripts/setup.sh: on a terminal one line rewritten
# in place, elsewhere (CI logs) a line at every tenth of the way. Any other line (a compiler's warning or
# error, Ninja's own messages) passes through unchanged.
#
#   NINJA_STATUS="[%f/%t %e] " cmake --build build | scripts/build_progress.sh
set -euo pipefail
terminal=0
if [ -t 1 ]; then terminal=1; fi
exec awk -v terminal="$terminal" '
  function short(what) {
    # "Building CXX object runtime/data/CMakeFiles/train_data.dir/images/transform.cpp.o" -> "runtime/data/images/transform.cpp"
    if (what ~ /^Building [A-Za-z]+ object /) {
      sub(/^Building [A-Za-z]+ object /, "", what)
      sub(/CMakeFiles\/[^\/]+\.dir\//, "", what)
      sub(/\.o$/, "", what)
      return what
    }
    sub(/^Linking [A-Za-z]+ /, "linking ", what)
    return what
  }
  match($0, /^\[[0-9]+\/[0-9]+( [0-9.]+)?\] /) {
    split(substr($0, 2, RLENGTH - 3), count, /[\/ ]/)
    done = count[1] + 0
    if (count[2] + 0 != total) { total = count[2] + 0; shown = 0 }
    line = sprintf("setup: %3d%% [%d/%d, %d s] %s", total ? int(100 * done / total) : 100, done, total,
                   count[3] + 0, short(substr($0, RLENGTH + 1)))
    if (terminal) {
      printf "\r\033[K%s", substr(line, 1, 150); open = 1
    } else if (total && (int(10 * done / total) > shown || done == total)) {
      shown = int(10 * done / total); print line; fflush()
    }
    next
  }
  {
    if (open) { printf "\n"; open = 0 }
    print; fflush()
  }
  END { if (open) printf "\n" }
'
