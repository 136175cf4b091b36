// The registry's tables, the same on SQLite and PostgreSQL (db/database.h's portable subset).
// A released step never changes: a new schema is a new step at the end.
#include "registry/registry_impl.h"

namespace reel::registry {

const std::vector<db::Migration>& RegistryMigrations() {
  static const std::vector<db::Migration> kSteps = {
      {1, R"sql(
CREATE TABLE registry_models (
  name TEXT PRIMARY KEY,
  next_version BIGINT NOT NULL,
  created_at TEXT NOT NULL,
  created_by TEXT NOT NULL);
CREATE TABLE registry_versions (
  model TEXT NOT NULL REFERENCES registry_models (name),
  version BIGINT NOT NULL,
  branch TEXT NOT NULL,
  architecture TEXT NOT NULL,
  config TEXT NOT NULL,
  metrics TEXT NOT NULL,
  recipe TEXT NOT NULL,
  dataset_uri TEXT NOT NULL,
  dataset_hash TEXT NOT NULL,
  code_commit TEXT NOT NULL,
  code_dirty BIGINT NOT NULL,
  author TEXT NOT NULL,
  created_at TEXT NOT NULL,
  message TEXT NOT NULL,
  weight_bytes BIGINT NOT NULL,
  stored_bytes BIGINT NOT NULL,
  weights_id TEXT NOT NULL,
  weights TEXT NOT NULL,
  optimizer TEXT,
  PRIMARY KEY (model, version));
CREATE TABLE registry_parents (
  model TEXT NOT NULL,
  version BIGINT NOT NULL,
  position BIGINT NOT NULL,
  parent_model TEXT NOT NULL,
  parent_version BIGINT NOT NULL,
  PRIMARY KEY (model, version, position));
CREATE INDEX registry_parents_by_parent ON registry_parents (parent_model, parent_version);
CREATE TABLE registry_tags (
  model TEXT NOT NULL,
  version BIGINT NOT NULL,
  tag TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (model, version, tag));
CREATE TABLE registry_branches (
  model TEXT NOT NULL,
  name TEXT NOT NULL,
  head BIGINT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (model, name));
CREATE TABLE registry_branch_log (
  model TEXT NOT NULL,
  branch TEXT NOT NULL,
  seq BIGINT NOT NULL,
  version BIGINT NOT NULL,
  action TEXT NOT NULL,
  by_user TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (model, branch, seq));
CREATE TABLE registry_aliases (
  model TEXT NOT NULL,
  name TEXT NOT NULL,
  version BIGINT NOT NULL,
  protected BIGINT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (model, name));
CREATE TABLE registry_alias_log (
  model TEXT NOT NULL,
  seq BIGINT NOT NULL,
  alias TEXT NOT NULL,
  from_version BIGINT,
  to_version BIGINT,
  by_user TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (model, seq));
)sql"},
      // Garbage collection's lease and generation (registry_gc.cc), and API users with the hash
      // of their token and their roles per model (access.h).
      {2, R"sql(
CREATE TABLE registry_gc (
  id BIGINT PRIMARY KEY,
  generation BIGINT NOT NULL,
  lease_until_ms BIGINT,
  holder TEXT);
INSERT INTO registry_gc (id, generation) VALUES (1, 0);
CREATE TABLE registry_users (
  name TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL UNIQUE,
  admin BIGINT NOT NULL,
  created_at TEXT NOT NULL);
CREATE TABLE registry_grants (
  user_name TEXT NOT NULL,
  model TEXT NOT NULL,
  role TEXT NOT NULL,
  PRIMARY KEY (user_name, model));
)sql"},
      // A version's large documents (its training config, whole evaluation report and weight
      // manifests: tens of kB, more with many classes) move beside it, so that a listing of
      // thousands of versions reads narrow rows only. The row's metrics become the report's
      // scalar entries for versions registered from now on (a listing drops the rest of older
      // rows' reports as it reads them).
      {3, R"sql(
CREATE TABLE registry_version_documents (
  model TEXT NOT NULL,
  version BIGINT NOT NULL,
  config TEXT NOT NULL,
  metrics TEXT NOT NULL,
  weights TEXT NOT NULL,
  optimizer TEXT,
  PRIMARY KEY (model, version));
INSERT INTO registry_version_documents (model, version, config, metrics, weights, optimizer)
  SELECT model, version, config, metrics, weights, optimizer FROM registry_versions;
ALTER TABLE registry_versions DROP COLUMN config;
ALTER TABLE registry_versions DROP COLUMN weights;
ALTER TABLE registry_versions DROP COLUMN optimizer;
)sql"},
  };
  return kSteps;
}

}  // namespace reel::registry
