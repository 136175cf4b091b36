#include "ingest/sources.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "base/csv.h"
#include "base/hash.h"

namespace reel::ingest {
namespace {

using storage::ObjectInfo;
using storage::ObjectStore;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string Basename(const std::string& key) { return key.substr(key.rfind('/') + 1); }

std::string StripExtension(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

std::string JoinKey(const std::string& prefix, const std::string& rest) {
  if (prefix.empty()) return rest;
  return prefix.back() == '/' ? prefix + rest : prefix + "/" + rest;
}

std::string FolderOf(const std::string& key) {
  size_t slash = key.rfind('/');
  return slash == std::string::npos ? "" : key.substr(0, slash);
}

Result<std::string> NormaliseSplit(const std::string& raw, const std::string& where) {
  std::string s = Lower(Trim(raw));
  if (s.empty() || s == "train" || s == "training") return std::string("train");
  if (s == "val" || s == "valid" || s == "validation" || s == "validate") return std::string("val");
  if (s == "test" || s == "testing") return std::string("test");
  return InvalidArgumentError(where + ": unknown split '" + raw +
                              "' (expected train, val or test)");
}

bool IsInteger(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Class names in index order: sorted numerically when all are integers, else by name.
std::vector<std::string> OrderClasses(const std::set<std::string>& labels) {
  std::vector<std::string> names(labels.begin(), labels.end());
  if (std::all_of(names.begin(), names.end(), IsInteger)) {
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
  }
  return names;
}

void Finish(SourceListing* listing) {
  std::sort(listing->videos.begin(), listing->videos.end(),
            [](const SourceVideo& a, const SourceVideo& b) {
              return a.key != b.key ? a.key < b.key : a.start_s < b.start_s;
            });
  std::ostringstream canonical;
  canonical.precision(17);
  canonical << listing->format << '\n';
  for (const auto& name : listing->class_names) canonical << name << '\n';
  for (const auto& v : listing->videos) {
    canonical << v.key << '\t' << v.size << '\t' << v.etag << '\t' << v.label << '\t' << v.split
              << '\t' << v.start_s << '\t' << v.end_s << '\n';
  }
  listing->hash = Xxh3_128Hex(canonical.str());
}

Result<std::string> ReadListingFile(ObjectStore& store, const std::string& key) {
  auto text = store.Get(key);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    return NotFoundError("listing '" + key + "' not found in " + store.uri());
  }
  return text;
}

// Maps column names of a header row to their positions.
std::map<std::string, size_t> HeaderColumns(const CsvRow& header) {
  std::map<std::string, size_t> columns;
  for (size_t i = 0; i < header.fields.size(); ++i) columns[Lower(Trim(header.fields[i]))] = i;
  return columns;
}

Result<double> ParseSeconds(const std::string& text, const std::string& where) {
  std::string t = Trim(text);
  if (t.empty()) return -1.0;
  char* end = nullptr;
  double value = std::strtod(t.c_str(), &end);
  if (*end != '\0' || value < 0) {
    return InvalidArgumentError(where + ": expected a time in seconds, got '" + text + "'");
  }
  return value;
}

// Every video under a prefix, by key.
Result<std::map<std::string, ObjectInfo>> ListVideos(ObjectStore& store,
                                                     const std::string& prefix) {
  REEL_ASSIGN_OR_RETURN(auto objects, storage::ListAll(store, prefix));
  std::map<std::string, ObjectInfo> videos;
  for (auto& object : objects) {
    if (IsVideoKey(object.key)) videos.emplace(object.key, std::move(object));
  }
  return videos;
}

struct PendingRow {  // a manifest row before class indices are known
  std::string key;
  std::string label;
  std::string split;
  double start_s, end_s;
};

// `labels` holds every label the listing names, including those of rows whose video is missing,
// so class indices do not depend on which downloads happened to succeed.
Result<SourceListing> FromRows(const std::string& format, const std::vector<PendingRow>& rows,
                               const std::map<std::string, ObjectInfo>& videos,
                               std::vector<MissingVideo> missing, std::set<std::string> labels) {
  SourceListing listing;
  listing.format = format;
  listing.missing = std::move(missing);
  for (const auto& row : rows) labels.insert(row.label);
  listing.class_names = OrderClasses(labels);
  std::map<std::string, int> index;
  for (size_t i = 0; i < listing.class_names.size(); ++i)
    index[listing.class_names[i]] = static_cast<int>(i);
  for (auto& row : rows) {
    auto it = videos.find(row.key);
    if (it == videos.end()) {
      listing.missing.push_back({row.key, "no such video in the store"});
      continue;
    }
    SourceVideo video;
    video.key = row.key;
    video.size = it->second.size;
    video.etag = it->second.etag;
    video.label = index[row.label];
    video.split = row.split;
    video.start_s = row.start_s;
    video.end_s = row.end_s;
    listing.videos.push_back(std::move(video));
  }
  Finish(&listing);
  return listing;
}

}  // namespace

bool IsVideoKey(const std::string& key) {
  static const std::set<std::string> kExtensions = {".mp4", ".avi", ".mkv",  ".mov", ".webm",
                                                    ".m4v", ".mpg", ".mpeg", ".flv", ".wmv",
                                                    ".3gp", ".ts",  ".ogv"};
  size_t dot = key.rfind('.');
  if (dot == std::string::npos || key.find('/', dot) != std::string::npos) return false;
  return kExtensions.count(Lower(key.substr(dot))) > 0;
}

Result<SourceListing> ListUcf101(ObjectStore& store, const std::string& root_in, int split_number) {
  std::string root = root_in;
  while (!root.empty() && root.back() == '/') root.pop_back();
  const std::string prefix = root.empty() ? "" : root + "/";
  REEL_ASSIGN_OR_RETURN(auto objects, storage::ListAll(store, prefix));

  std::map<std::string, ObjectInfo> videos;  // relative path -> object
  std::map<std::string, std::string> lists;  // file name -> key, for classInd / split lists
  std::set<std::string> folder_classes;
  for (auto& object : objects) {
    std::string rel = object.key.substr(prefix.size());
    std::string name = Basename(rel);
    if (rel == name || rel == "ucfTrainTestlist/" + name) {
      if (name.size() > 4 && name.substr(name.size() - 4) == ".txt") lists[name] = object.key;
    }
    size_t slash = rel.find('/');
    if (slash == std::string::npos || !IsVideoKey(rel)) continue;
    folder_classes.insert(rel.substr(0, slash));
    videos.emplace(rel, std::move(object));
  }
  if (videos.empty()) {
    return NotFoundError("no videos in UCF101 layout (<class>/<video>) under " + store.uri() +
                         (root.empty() ? "" : "/" + root));
  }

  SourceListing listing;
  listing.format = "ucf101";
  if (auto it = lists.find("classInd.txt"); it != lists.end()) {
    REEL_ASSIGN_OR_RETURN(std::string text, ReadListingFile(store, it->second));
    std::istringstream in(text);
    std::string line;
    int line_number = 0;
    std::map<int, std::string> by_index;
    while (std::getline(in, line)) {
      ++line_number;
      line = Trim(line);
      if (line.empty()) continue;
      std::istringstream fields(line);
      int number = 0;
      std::string name;
      if (!(fields >> number >> name) || number < 1) {
        return InvalidArgumentError(it->second + ":" + std::to_string(line_number) +
                                    ": expected '<index> <ClassName>', got '" + line + "'");
      }
      by_index[number] = name;
    }
    for (const auto& [number, name] : by_index) {
      if (number != static_cast<int>(listing.class_names.size()) + 1) {
        return InvalidArgumentError(it->second + ": class indices must run 1..N without gaps; " +
                                    std::to_string(listing.class_names.size() + 1) + " is missing");
      }
      listing.class_names.push_back(name);
    }
  } else {
    listing.class_names.assign(folder_classes.begin(), folder_classes.end());
  }
  std::map<std::string, int> class_index;
  for (size_t i = 0; i < listing.class_names.size(); ++i) {
    class_index[Lower(listing.class_names[i])] = static_cast<int>(i);
  }
  for (const auto& folder : folder_classes) {
    if (!class_index.count(Lower(folder))) {
      return InvalidArgumentError("class folder '" + folder + "' is not listed in classInd.txt");
    }
  }

  // Split lists name videos as "Class/file.avi"; real UCF101 lists differ from the folders in
  // letter case for a few classes, so match case-insensitively.
  std::map<std::string, std::string> split_of;  // lower-cased relative path -> split
  char train_name[32], test_name[32];
  std::snprintf(train_name, sizeof train_name, "trainlist%02d.txt", split_number);
  std::snprintf(test_name, sizeof test_name, "testlist%02d.txt", split_number);
  bool has_splits = false;
  for (const auto& [file, split] : {std::pair<std::string, std::string>{train_name, "train"},
                                    std::pair<std::string, std::string>{test_name, "test"}}) {
    auto it = lists.find(file);
    if (it == lists.end()) continue;
    has_splits = true;
    REEL_ASSIGN_OR_RETURN(std::string text, ReadListingFile(store, it->second));
    std::istringstream in(text);
    std::string line;
    std::set<std::string> lower_paths;
    for (const auto& [rel, object] : videos) lower_paths.insert(Lower(rel));
    while (std::getline(in, line)) {
      line = Trim(line);
      if (line.empty()) continue;
      std::string path = line.substr(0, line.find(' '));
      std::string lower = Lower(path);
      if (!lower_paths.count(lower)) {
        listing.missing.push_back({path, "listed in " + file + " but not found"});
        continue;
      }
      split_of[lower] = split;
    }
  }

  for (auto& [rel, object] : videos) {
    std::string split = "train";
    if (has_splits) {
      auto it = split_of.find(Lower(rel));
      if (it == split_of.end()) {
        listing.missing.push_back(
            {object.key, std::string("not in ") + train_name + " or " + test_name});
        continue;
      }
      split = it->second;
    }
    SourceVideo video;
    video.key = object.key;
    video.size = object.size;
    video.etag = object.etag;
    video.label = class_index[Lower(rel.substr(0, rel.find('/')))];
    video.split = split;
    listing.videos.push_back(std::move(video));
  }
  Finish(&listing);
  return listing;
}

Result<SourceListing> ListKinetics(ObjectStore& store, const std::string& csv_key,
                                   const std::string& video_root) {
  REEL_ASSIGN_OR_RETURN(std::string text, ReadListingFile(store, csv_key));
  REEL_ASSIGN_OR_RETURN(auto rows, ParseCsv(text, csv_key));
  if (rows.empty()) return InvalidArgumentError(csv_key + ": empty Kinetics CSV");
  auto columns = HeaderColumns(rows[0]);
  for (const char* needed : {"label", "youtube_id", "time_start", "time_end"}) {
    if (!columns.count(needed)) {
      return InvalidArgumentError(csv_key + ":1: Kinetics header needs a '" + std::string(needed) +
                                  "' column (label,youtube_id,time_start,time_end,split)");
    }
  }
  std::string root = video_root;
  while (!root.empty() && root.back() == '/') root.pop_back();
  REEL_ASSIGN_OR_RETURN(auto all_videos, ListVideos(store, root.empty() ? "" : root + "/"));
  std::map<std::string, std::string> by_stem;  // file name without extension -> key
  for (const auto& [key, info] : all_videos) by_stem.emplace(StripExtension(Basename(key)), key);

  std::vector<PendingRow> pending;
  std::vector<MissingVideo> missing;
  std::set<std::string> labels;
  for (size_t r = 1; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    std::string where = csv_key + ":" + std::to_string(row.line);
    if (row.fields.size() != rows[0].fields.size()) {
      return InvalidArgumentError(where + ": expected " + std::to_string(rows[0].fields.size()) +
                                  " columns, got " + std::to_string(row.fields.size()));
    }
    auto field = [&](const char* name) { return Trim(row.fields[columns[name]]); };
    std::string start = field("time_start"), end = field("time_end");
    if (!IsInteger(start) || !IsInteger(end) || std::stol(start) >= std::stol(end)) {
      return InvalidArgumentError(where +
                                  ": time_start/time_end must be whole seconds with "
                                  "start < end, got '" +
                                  start + "', '" + end + "'");
    }
    char stem[512];
    std::snprintf(stem, sizeof stem, "%s_%06ld_%06ld", field("youtube_id").c_str(),
                  std::stol(start), std::stol(end));
    std::string split = "train";
    if (columns.count("split")) {
      REEL_ASSIGN_OR_RETURN(split, NormaliseSplit(field("split"), where));
    }
    labels.insert(field("label"));
    auto it = by_stem.find(stem);
    if (it == by_stem.end()) {
      missing.push_back({stem, where + ": no video file named " + std::string(stem) + ".*"});
      continue;
    }
    pending.push_back({it->second, field("label"), split, -1, -1});
  }
  return FromRows("kinetics", pending, all_videos, std::move(missing), std::move(labels));
}

Result<SourceListing> ListManifest(ObjectStore& store, const std::string& manifest_key) {
  REEL_ASSIGN_OR_RETURN(std::string text, ReadListingFile(store, manifest_key));
  const std::string folder = FolderOf(manifest_key);
  std::vector<PendingRow> pending;
  bool jsonl =
      manifest_key.size() > 6 && Lower(manifest_key.substr(manifest_key.size() - 6)) == ".jsonl";
  if (jsonl) {
    std::istringstream in(text);
    std::string line;
    int line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      if (Trim(line).empty()) continue;
      std::string where = manifest_key + ":" + std::to_string(line_number);
      nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!row.is_object()) return InvalidArgumentError(where + ": not a JSON object");
      if (!row.contains("path") || !row["path"].is_string()) {
        return InvalidArgumentError(where + ": needs a string \"path\"");
      }
      if (!row.contains("label") ||
          !(row["label"].is_string() || row["label"].is_number_integer())) {
        return InvalidArgumentError(where + ": needs a \"label\" (string or integer)");
      }
      PendingRow p;
      p.key = JoinKey(folder, row["path"].get<std::string>());
      p.label = row["label"].is_string() ? row["label"].get<std::string>()
                                         : std::to_string(row["label"].get<int64_t>());
      p.start_s =
          row.contains("start") && row["start"].is_number() ? row["start"].get<double>() : -1;
      p.end_s = row.contains("end") && row["end"].is_number() ? row["end"].get<double>() : -1;
      std::string split =
          row.contains("split") && row["split"].is_string() ? row["split"].get<std::string>() : "";
      REEL_ASSIGN_OR_RETURN(p.split, NormaliseSplit(split, where));
      if (p.start_s >= 0 && p.end_s >= 0 && p.start_s >= p.end_s) {
        return InvalidArgumentError(where + ": start must be before end");
      }
      pending.push_back(std::move(p));
    }
  } else {
    REEL_ASSIGN_OR_RETURN(auto rows, ParseCsv(text, manifest_key));
    if (rows.empty()) return InvalidArgumentError(manifest_key + ": empty manifest");
    auto columns = HeaderColumns(rows[0]);
    if (!columns.count("path") || !columns.count("label")) {
      return InvalidArgumentError(manifest_key +
                                  ":1: the header must name path,label[,start,end,split]");
    }
    for (size_t r = 1; r < rows.size(); ++r) {
      const CsvRow& row = rows[r];
      std::string where = manifest_key + ":" + std::to_string(row.line);
      if (row.fields.size() != rows[0].fields.size()) {
        return InvalidArgumentError(where + ": expected " + std::to_string(rows[0].fields.size()) +
                                    " columns, got " + std::to_string(row.fields.size()));
      }
      auto field = [&](const char* name) {
        return columns.count(name) ? Trim(row.fields[columns[name]]) : std::string();
      };
      PendingRow p;
      p.key = JoinKey(folder, field("path"));
      p.label = field("label");
      if (p.label.empty()) return InvalidArgumentError(where + ": empty label");
      REEL_ASSIGN_OR_RETURN(p.start_s, ParseSeconds(field("start"), where));
      REEL_ASSIGN_OR_RETURN(p.end_s, ParseSeconds(field("end"), where));
      if (p.start_s >= 0 && p.end_s >= 0 && p.start_s >= p.end_s) {
        return InvalidArgumentError(where + ": start must be before end");
      }
      REEL_ASSIGN_OR_RETURN(p.split, NormaliseSplit(field("split"), where));
      pending.push_back(std::move(p));
    }
  }
  REEL_ASSIGN_OR_RETURN(auto videos, ListVideos(store, folder.empty() ? "" : folder + "/"));
  return FromRows("manifest", pending, videos, {}, {});
}

Result<SourceListing> ListSources(ObjectStore& store, const std::string& key_or_root) {
  std::string lower = Lower(key_or_root);
  auto ends_with = [&](const std::string& suffix) {
    return lower.size() >= suffix.size() &&
           lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".jsonl")) return ListManifest(store, key_or_root);
  if (ends_with(".csv")) {
    REEL_ASSIGN_OR_RETURN(std::string text, ReadListingFile(store, key_or_root));
    std::string header = Lower(text.substr(0, text.find('\n')));
    if (header.find("youtube_id") != std::string::npos) {
      return ListKinetics(store, key_or_root, FolderOf(key_or_root));
    }
    return ListManifest(store, key_or_root);
  }
  return ListUcf101(store, key_or_root);
}

}  // namespace reel::ingest
