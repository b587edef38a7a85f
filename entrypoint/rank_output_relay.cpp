#include "entrypoint/rank_output_relay.h"

#include <algorithm>

namespace train {

namespace {

struct TagMatch {
  enum { none, partial, complete } kind = none;
  size_t length = 0;
  int rank = -1;
  OutputStream stream = OutputStream::out;
};

// Matches "[digits,digits]<stdout>:" (or <stderr>, <stddiag>) at `at`. `partial` means the bytes so far
// are a prefix of a tag and more input is needed to decide.
TagMatch match_tag(std::string_view text, size_t at) {
  TagMatch match;
  size_t i = at;
  auto need_more = [&] {
    match.kind = TagMatch::partial;
    return match;
  };
  if (i >= text.size()) return need_more();
  if (text[i++] != '[') return match;
  auto read_number = [&](long& value) -> int {  // 1 ok, 0 not a number, -1 need more
    size_t start = i;
    value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 9) value = value * 10 + (text[i++] - '0');
    if (i == text.size()) return -1;
    return i > start ? 1 : 0;
  };
  long job = 0, rank = 0;
  int got = read_number(job);
  if (got < 0) return need_more();
  if (got == 0 || text[i++] != ',') return match;
  got = read_number(rank);
  if (got < 0) return need_more();
  if (got == 0 || text[i++] != ']') return match;
  static constexpr std::string_view names[] = {"<stdout>:", "<stderr>:", "<stddiag>:"};
  std::string_view rest = text.substr(i);
  for (size_t n = 0; n < 3; ++n) {
    auto name = names[n];
    if (rest.size() >= name.size() && rest.substr(0, name.size()) == name) {
      match.kind = TagMatch::complete;
      match.length = i + name.size() - at;
      match.rank = static_cast<int>(rank);
      match.stream = n == 0 ? OutputStream::out : OutputStream::err;
      return match;
    }
  }
  for (auto name : names) {
    if (rest.size() < name.size() && name.substr(0, rest.size()) == rest) return need_more();
  }
  return match;
}

}  // namespace

void TaggedOutputDemux::emit(const Key& key) {
  std::string& line = partial(key);
  sink_(RankLine{key.rank, key.stream, line});
  line.clear();
}

// Where a full line of `line.size()` bytes can be cut without splitting a UTF-8 character: before an
// incomplete character at its end, else at its end.
static size_t utf8_safe_cut(const std::string& line) {
  size_t start = line.size();
  size_t continuation = 0;
  while (start > 0 && continuation < 3 && (static_cast<unsigned char>(line[start - 1]) & 0xC0) == 0x80) {
    --start;
    ++continuation;
  }
  if (start == 0) return line.size();
  unsigned char lead = static_cast<unsigned char>(line[start - 1]);
  size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  bool incomplete = length > 1 && continuation + 1 < length;
  return incomplete && start - 1 > 0 ? start - 1 : line.size();
}

void TaggedOutputDemux::append(const Key& key, std::string_view text) {
  while (!text.empty()) {
    std::string& line = partial(key);
    size_t take = std::min(text.size(), max_line_bytes - line.size());
    line.append(text.substr(0, take));
    text.remove_prefix(take);
    if (line.size() < max_line_bytes) return;
    // A full line goes out as a piece; what did not fit (at most an unfinished character) starts the next.
    size_t cut = utf8_safe_cut(line);
    std::string rest = line.substr(cut);
    line.resize(cut);
    emit(key);
    partial(key) = std::move(rest);
  }
}

void TaggedOutputDemux::feed(OutputStream source, std::string_view bytes) {
  sources_[static_cast<int>(source)].pending.append(bytes);
  process(source, false);
}

void TaggedOutputDemux::finish() {
  for (auto source : {OutputStream::out, OutputStream::err}) process(source, true);
  for (auto& [key, line] : partial_) {
    if (!line.empty()) {
      sink_(RankLine{key.first, static_cast<OutputStream>(key.second), line});
      line.clear();
    }
  }
}

void TaggedOutputDemux::process(OutputStream source, bool final) {
  SourceState& state = sources_[static_cast<int>(source)];
  std::string_view text = state.pending;
  size_t pos = 0;
  while (pos < text.size()) {
    if (state.at_line_start) {
      TagMatch tag = match_tag(text, pos);
      if (tag.kind == TagMatch::partial && !final) break;
      if (tag.kind == TagMatch::complete) {
        state.current = Key{tag.rank, tag.stream};
        pos += tag.length;
      } else {
        state.current = Key{-1, source};  // mpirun's own words
      }
      state.at_line_start = false;
      continue;
    }
    size_t end = pos;
    bool wait_for_more = false;
    for (; end < text.size(); ++end) {
      if (text[end] == '\n') break;
      if (text[end] == '[') {
        TagMatch tag = match_tag(text, end);
        if (tag.kind == TagMatch::complete) break;
        if (tag.kind == TagMatch::partial && !final) {
          wait_for_more = true;
          break;
        }
      }
    }
    append(state.current, text.substr(pos, end - pos));
    pos = end;
    if (wait_for_more || end == text.size()) break;
    if (text[end] == '\n') {
      emit(state.current);
      ++pos;
      state.at_line_start = true;
      continue;
    }
    // A new chunk starts mid-line: the interrupted line stays partial until its rank's next chunk.
    TagMatch tag = match_tag(text, end);
    state.current = Key{tag.rank, tag.stream};
    pos += tag.length;
  }
  state.pending.erase(0, pos);
}

}  // namespace train
