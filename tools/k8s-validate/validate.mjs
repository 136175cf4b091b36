#!/usr/bin/env node
// Validates Kubernetes objects offline against the Kubernetes API schema (the OpenAPI schema
// that the npm package kubernetes-models is generated from), as `kubectl apply --dry-run=server`
// would before it looks at the cluster: required fields, types, enums and formats.
//
//   node tools/k8s-validate/validate.mjs [FILE]     (no FILE or "-": standard input)
//
// FILE holds one or more YAML documents (separated by "---"), one object each. Every object is
// built with kubernetes-models' class for its apiVersion and kind and validated. Prints one line
// per object, "ok KIND NAME" or "invalid: FILE: document N (KIND NAME): what is wrong", and exits
// 0 when every object is valid, 1 when one is not (or the YAML does not parse, or holds no
// object), 2 on a usage error or a file that cannot be read. Fields the schema does not know are
// not errors (Kubernetes' schema allows them; the API server drops them).
//
// Needs `npm ci` in this folder first (scripts/setup.sh --tests runs it).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);

function fail(message) {
  process.stderr.write(`k8s-validate: ${message}\n`);
  process.exit(2);
}

// The kubernetes-models class for apiVersion ("v1", "apps/v1", "autoscaling/v2") and kind, or
// a string saying why there is none. Its module path is kubernetes-models/<apiVersion>/<kind>.
function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== "string" || !/^([a-z0-9.-]+\/)?v[0-9a-z]+$/.test(apiVersion)) {
    return `apiVersion ${JSON.stringify(apiVersion)} is not a Kubernetes API version`;
  }
  if (typeof kind !== "string" || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    return `kind ${JSON.stringify(kind)} is not a Kubernetes kind`;
  }
  let module;
  try {
    module = require(`kubernetes-models/${apiVersion}/${kind}`);
  } catch (e) {
    if (e && e.code === "MODULE_NOT_FOUND" && String(e.message).includes("kubernetes-models/")) {
      return `kubernetes-models knows no ${kind} in ${apiVersion}`;
    }
    throw e;
  }
  const cls = module[kind];
  if (typeof cls !== "function" || cls.apiVersion !== apiVersion || cls.kind !== kind) {
    return `kubernetes-models knows no ${kind} in ${apiVersion}`;
  }
  return cls;
}

// The validation error as one line: kubernetes-models' message lists every failed rule.
function oneLine(error) {
  const message = error && error.message ? error.message : String(error);
  return message.replace(/\s*\n\s*/g, "; ").trim();
}

const args = process.argv.slice(2);
if (args.length > 1) fail("at most one file; usage: node validate.mjs [FILE|-]");
const source = args.length === 0 || args[0] === "-" ? "-" : args[0];
const name = source === "-" ? "<stdin>" : source;
let text;
try {
  text = readFileSync(source === "-" ? 0 : source, "utf8");
} catch (e) {
  fail(`cannot read ${name}: ${e.message}`);
}

let invalid = 0;
let valid = 0;
const documents = parseAllDocuments(text);
// parseAllDocuments returns an EmptyStream (not an array) for input with no documents.
const list = Array.isArray(documents) ? documents : [];
list.forEach((doc, i) => {
  const where = `${name}: document ${i + 1}`;
  if (doc.errors.length > 0) {
    console.log(`invalid: ${where}: YAML: ${doc.errors[0].message.split("\n")[0]}`);
    invalid++;
    return;
  }
  const object = doc.toJS();
  if (object === null || object === undefined) return;  // an empty document, as kubectl skips
  if (typeof object !== "object" || Array.isArray(object)) {
    console.log(`invalid: ${where}: not an object`);
    invalid++;
    return;
  }
  const kind = typeof object.kind === "string" ? object.kind : "?";
  const objectName = object.metadata && object.metadata.name ? object.metadata.name : "?";
  const label = `${where} (${kind} ${objectName})`;
  const cls = modelClass(object.apiVersion, object.kind);
  if (typeof cls === "string") {
    console.log(`invalid: ${label}: ${cls}`);
    invalid++;
    return;
  }
  try {
    new cls(object).validate();
  } catch (e) {
    console.log(`invalid: ${label}: ${oneLine(e)}`);
    invalid++;
    return;
  }
  console.log(`ok ${kind} ${objectName}`);
  valid++;
});

if (valid + invalid === 0) {
  console.log(`invalid: ${name}: no Kubernetes object in it`);
  process.exit(1);
}
process.exit(invalid > 0 ? 1 : 0);
