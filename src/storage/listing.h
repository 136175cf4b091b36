// Internal to storage: turns a sorted run of objects into one List() page, so that every store
// that lists from a local view (memory, local files) pages, groups and validates tokens alike.
#pragma once

#include <vector>

#include "storage/object_store.h"

namespace reel::storage {

// `sorted` holds every object under options.prefix in ascending key order.
// Errors: InvalidArgument for max_keys outside 1..1000 or a page token outside the prefix.
Result<ListPage> PageFromSortedObjects(const std::vector<ObjectInfo>& sorted,
                                       const ListOptions& options);

// InvalidArgument for max_keys outside 1..1000 or a page token that does not start with prefix.
Status ValidateListOptions(const ListOptions& options);

}  // namespace reel::storage
