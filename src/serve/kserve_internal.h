// Private to the KServe v2 codec (kserve.cc, kserve_parse.cc, kserve_elements.cc,
// kserve_client.cc): the helpers that more than one of its files use. Nothing else includes it;
// the codec's interface is kserve.h (its test reaches in here for the number scanner).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "serve/kserve.h"

namespace reel::serve::internal {

// simdjson parsers kept for reuse. Each holds buffers about 2.5 times the largest request it has
// read; one per thread, on `reel serve`'s 64 handler threads, faulted them in again on each
// thread a request landed on (about 4 MB for a 1.6 MB request, several milliseconds on a VM) and
// kept 64 sets. As many are kept as parses run at once, up to one per core.
class ParserPool {
 public:
  class Lease {
   public:
    Lease(ParserPool* pool, std::unique_ptr<simdjson::ondemand::parser> parser)
        : pool_(pool), parser_(std::move(parser)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_->GiveBack(std::move(parser_)); }
    simdjson::ondemand::parser& operator*() const { return *parser_; }

   private:
    ParserPool* pool_;
    std::unique_ptr<simdjson::ondemand::parser> parser_;
  };

  Lease Take();

 private:
  void GiveBack(std::unique_ptr<simdjson::ondemand::parser> parser);

  std::mutex mutex_;
  std::vector<std::unique_ptr<simdjson::ondemand::parser>> idle_;
};
ParserPool& Parsers();  // the process's

// A name as messages show it: quoted, printable, at most 100 characters.
std::string Quoted(std::string_view name);
// Appends a BYTES element's 4-byte little-endian length.
void PutLength(std::string* out, uint32_t length);

// InvalidArgument: a request simdjson could not read at `where`.
Status Malformed(std::string_view where, simdjson::error_code error);
// Reads an input's JSON "data" (the text of its value, flat or nested) into tensor->data as
// elements of its datatype: InvalidArgument unless there are exactly `expected` of them.
Status ReadJsonData(std::string_view text, int64_t expected, Tensor* tensor);

// The common requests' fast path: the text of a JSON array of numbers (nested at most
// `max_nesting` deep, whitespace anywhere JSON allows) read in one pass into `out`. As floats,
// each is the correctly rounded double of its text cast to float; as bytes, each must be a plain
// integer from 0 to 255 ("1.0", "-0" and "1e2" are left to the general path, which refuses
// them). Returns how many numbers the array held, or -1 if it holds anything else, is not one
// whole array, has more than `capacity` numbers, or one out of range: the caller's general path
// then reads it and words the error.
int64_t ScanNumberArray(std::string_view text, int max_nesting, float* out, int64_t capacity);
int64_t ScanNumberArray(std::string_view text, int max_nesting, uint8_t* out, int64_t capacity);
// An array of 256 KiB or more is read in two halves at once, split at a ',' near its middle,
// when a spare thread is idle (else by the caller alone). For the tests: the same split at the
// ',' at `split` (a bug if it is not one), the second half on a new thread; the same answer as
// the scan in one piece.
int64_t ScanNumberArraySplitAt(std::string_view text, size_t split, int max_nesting, float* out,
                               int64_t capacity);
int64_t ScanNumberArraySplitAt(std::string_view text, size_t split, int max_nesting, uint8_t* out,
                               int64_t capacity);

// The four bytes JSON counts as whitespace.
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A request with its large "data" arrays cut out (CutDataArrays): `compact` is the request with
// each such array replaced by "[]" (with simdjson's padding past its end), and `arrays` holds,
// for each, where its "[]" starts in `compact` and the array's text in the original.
struct CutRequest {
  std::string compact;
  std::vector<std::pair<size_t, std::string_view>> arrays;

  // The original text of the array whose "[]" is `text` (a view into `compact`); else `text`.
  std::string_view Original(std::string_view text) const;
};
// Cuts every array of at least `min_bytes` that is the value of a "data" key (outside strings)
// and holds no string, so that simdjson indexes the rest only; the number scanner, which reads
// and checks a data array's every byte anyway, reads the original text. False, with nothing
// cut, when there is no such array. Malformed JSON is left for simdjson to find.
bool CutDataArrays(std::string_view json, size_t min_bytes, CutRequest* out);

// Whether a tensor's data has no JSON form (FP16, BF16, BYTES that are not UTF-8).
bool NeedsBinary(const Tensor& t);
// `message` with `key` set to the tensors, the data of those marked `binary` appended after the
// JSON (the binary tensor extension).
Body EncodeTensors(nlohmann::json message, const char* key, const std::vector<Tensor>& tensors,
                   const std::vector<bool>& binary);

}  // namespace reel::serve::internal
