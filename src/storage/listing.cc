#include "storage/listing.h"

#include <algorithm>

namespace reel::storage {

Status ValidateListOptions(const ListOptions& options) {
  if (options.max_keys < 1 || options.max_keys > 1000) {
    return InvalidArgumentError("list: max_keys must be between 1 and 1000, got " +
                                std::to_string(options.max_keys));
  }
  if (!options.page_token.empty() &&
      options.page_token.compare(0, options.prefix.size(), options.prefix) != 0) {
    return InvalidArgumentError("list: page token '" + options.page_token +
                                "' was not issued for prefix '" + options.prefix + "'");
  }
  return Status::Ok();
}

// The page token is the last key or common prefix returned; the next page starts after it.
Result<ListPage> PageFromSortedObjects(const std::vector<ObjectInfo>& sorted,
                                       const ListOptions& options) {
  REEL_RETURN_IF_ERROR(ValidateListOptions(options));
  ListPage page;
  auto it = std::lower_bound(sorted.begin(), sorted.end(), options.prefix,
                             [](const ObjectInfo& o, const std::string& k) { return o.key < k; });
  const std::string& token = options.page_token;
  if (!token.empty()) {
    it = std::upper_bound(sorted.begin(), sorted.end(), token,
                          [](const std::string& k, const ObjectInfo& o) { return k < o.key; });
  }
  int emitted = 0;
  std::string last;
  for (; it != sorted.end(); ++it) {
    const std::string& key = it->key;
    if (key.compare(0, options.prefix.size(), options.prefix) != 0) break;
    if (emitted == options.max_keys) {
      // The rest of the group returned last belongs to no later page; promise a next page
      // only when something else is left for it.
      if (!page.common_prefixes.empty() && last == page.common_prefixes.back() &&
          key.compare(0, last.size(), last) == 0) {
        continue;
      }
      page.next_page_token = last;
      return page;
    }
    if (!options.delimiter.empty()) {
      size_t cut = key.find(options.delimiter, options.prefix.size());
      if (cut != std::string::npos) {
        std::string group = key.substr(0, cut + options.delimiter.size());
        // A token inside a group means that group was already returned.
        if (!token.empty() && token.compare(0, group.size(), group) == 0) continue;
        if (page.common_prefixes.empty() || page.common_prefixes.back() != group) {
          page.common_prefixes.push_back(group);
          last = group;
          ++emitted;
        }
        continue;
      }
    }
    page.objects.push_back(*it);
    last = key;
    ++emitted;
  }
  return page;
}

}  // namespace reel::storage
