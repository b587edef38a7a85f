// Turning mpirun's --tag-output stream back into whole lines per rank.
//
// mpirun forwards each rank's output in chunks as they arrive and starts every chunk with a tag
// "[job,rank]<stdout>:". A chunk may end mid-line, and the next chunk on the same stream may belong to
// another rank, so a line of rank 1 can arrive as "[1,1]<stdout>:par" ... "[1,1]<stdout>:tial\n" with
// rank 0's text in between. The demultiplexer keeps one partial line per rank and stream and emits a line
// only when it is complete, so no printed line ever mixes two ranks.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace train {

enum class OutputStream { out = 0, err = 1 };

struct RankLine {
  int rank = -1;  // -1: mpirun's own (untagged) output
  OutputStream stream = OutputStream::out;
  std::string text;  // without the newline
};

class TaggedOutputDemux {
 public:
  using Sink = std::function<void(const RankLine&)>;
  // Longer lines are emitted in pieces of at most this many bytes (cut between UTF-8 characters) rather
  // than held without bound.
  static constexpr size_t max_line_bytes = 64 * 1024;

  explicit TaggedOutputDemux(Sink sink) : sink_(std::move(sink)) {}

  // Bytes read from mpirun's stdout (`source` out) or stderr (`source` err).
  void feed(OutputStream source, std::string_view bytes);
  // End of both streams: whatever partial lines remain are emitted as they are.
  void finish();

 private:
  struct Key {
    int rank;
    OutputStream stream;
  };
  struct SourceState {
    std::string pending;
    bool at_line_start = true;
    Key current{-1, OutputStream::out};
  };
  void process(OutputStream source, bool final);
  std::string& partial(const Key& key) { return partial_[{key.rank, static_cast<int>(key.stream)}]; }
  void emit(const Key& key);
  void append(const Key& key, std::string_view text);  // to the key's partial line, emitting full pieces

  Sink sink_;
  std::array<SourceState, 2> sources_;
  std::map<std::pair<int, int>, std::string> partial_;
};

}  // namespace train
