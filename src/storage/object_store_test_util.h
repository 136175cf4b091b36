// Helpers shared by object_store_test.cc and object_store_conformance_test.cc: paging through
// List() results and checking them against a brute-force listing of the same keys. Tests only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "storage/object_store.h"
#include "testing/status_matchers.h"

namespace reel::storage::testing {

// What a listing returns: object keys and common prefixes, in order.
struct Listing {
  std::vector<std::string> objects;
  std::vector<std::string> prefixes;
};

// The listing of `keys` under `prefix`, grouped at `delimiter`, without paging.
inline Listing BruteForce(std::vector<std::string> keys, const std::string& prefix,
                          const std::string& delimiter) {
  std::sort(keys.begin(), keys.end());
  Listing out;
  for (const std::string& key : keys) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    if (!delimiter.empty()) {
      size_t cut = key.find(delimiter, prefix.size());
      if (cut != std::string::npos) {
        std::string group = key.substr(0, cut + delimiter.size());
        if (out.prefixes.empty() || out.prefixes.back() != group) out.prefixes.push_back(group);
        continue;
      }
    }
    out.objects.push_back(key);
  }
  return out;
}

using ListFn = std::function<Result<ListPage>(const ListOptions&)>;

// Follows page tokens to the end; every object's size must equal its key's length.
inline void PageThrough(const ListFn& list, const std::string& prefix, const std::string& delimiter,
                        int max_keys, Listing* got) {
  ListOptions options;
  options.prefix = prefix;
  options.delimiter = delimiter;
  options.max_keys = max_keys;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 10000) << "paging never ends";
    Result<ListPage> page = list(options);
    ASSERT_OK(page);
    size_t entries = page->objects.size() + page->common_prefixes.size();
    ASSERT_LE(entries, static_cast<size_t>(max_keys));
    if (!page->next_page_token.empty()) {
      // A token promises more: the page is full, and (checked on the next round) the next one
      // is not empty.
      EXPECT_EQ(entries, static_cast<size_t>(max_keys));
    }
    if (pages > 0) {
      EXPECT_GT(entries, 0u) << "an empty page after token '" << options.page_token << "'";
    }
    for (const ObjectInfo& object : page->objects) {
      EXPECT_EQ(object.size, object.key.size()) << object.key;
      got->objects.push_back(object.key);
    }
    for (const std::string& group : page->common_prefixes) got->prefixes.push_back(group);
    if (page->next_page_token.empty()) break;
    options.page_token = page->next_page_token;
  }
}

// Keys that can coexist as files (no key is another key's parent), with groups of several keys
// that span page boundaries, and neighbours of '/' in byte order ('-' '.' < '/' < '0').
inline const std::vector<std::string>& PagingKeys() {
  static const std::vector<std::string> keys = {
      "a.txt", "a/1",     "a/2",   "a/3",   "a/4", "a/5/x",      "a0",
      "a-b",   "b",       "c/x/1", "c/x/2", "c/y", "d/1",        "d0",
      "e-",    "f/g/h/i", "y/1",   "y/2",   "y/3", "\xC3\xA9/1", "z-\xC3\xA9"};
  return keys;
}

// Pages through `list` over `keys` (already stored) for many prefixes, delimiters and page
// sizes, expecting the brute-force listing every time.
inline void ExpectPagingMatchesBruteForce(const ListFn& list,
                                          const std::vector<std::string>& keys) {
  for (std::string prefix : {"", "a", "a/", "c/", "c/x", "c/x/", "f/g/", "y/", "zz", "\xC3\xA9"}) {
    for (std::string delimiter : {"", "/"}) {
      Listing expected = BruteForce(keys, prefix, delimiter);
      for (int max_keys : {1, 2, 3, 4, 7, 1000}) {
        SCOPED_TRACE("prefix '" + prefix + "' delimiter '" + delimiter + "' max_keys " +
                     std::to_string(max_keys));
        Listing got;
        ASSERT_NO_FATAL_FAILURE(PageThrough(list, prefix, delimiter, max_keys, &got));
        EXPECT_EQ(got.objects, expected.objects);
        EXPECT_EQ(got.prefixes, expected.prefixes);
      }
    }
  }
}

}  // namespace reel::storage::testing
