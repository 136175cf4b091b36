#!/usr/bin/env python3
"""Prepares a clang-tidy run: the compile database clang-tidy reads, and a key per source file.

Usage: tidy_prepare.py BUILD_DIR JOBS FILE...

Writes BUILD_DIR/tidy/compile_commands.json with one entry per source file, as clang-tidy needs:
a unity build's batch (unity_N_cxx.cxx, which #includes several sources) becomes one entry per
source with the batch's command; GCC's precompiled headers and GCC-only warning flags are
dropped, since they mean nothing to clang.

Prints "KEY FILE" for each FILE in the database: a hash of all clang-tidy reads when it lints the
file (its version, .clang-tidy, the compile command and the preprocessed text, so a change to
the file, to any header it includes or to the flags gives a new key). scripts/check-tidy.sh
skips files whose key an earlier clean run recorded.
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

GCC_ONLY = re.compile(r" -Winvalid-pch| -include [^ ]*cmake_pch\.hxx| -Wno-subobject-linkage")
UNITY_INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def per_file_entries(database):
    """The database's entries with each unity batch split into its sources."""
    for entry in database:
        command = GCC_ONLY.sub("", entry["command"])
        batch = entry["file"]
        sources = [batch]
        if os.path.basename(batch).startswith("unity_"):
            with open(batch) as text:
                sources = UNITY_INCLUDE.findall(text.read())
        for source in sources:
            yield {"directory": entry["directory"], "file": source,
                   "command": command.replace(batch, source)}


def preprocess_command(command):
    """The compile command with its outputs dropped, preprocessing the source to stdout."""
    args, out, skip = shlex.split(command), [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
        elif arg not in ("-c", "-MD", "-MMD"):
            out.append(arg)
    return out[:-1] + ["-E", "-P", out[-1]]


def main():
    build, jobs, wanted = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    with open(os.path.join(build, "compile_commands.json")) as db:
        entries = list(per_file_entries(json.load(db)))
    os.makedirs(os.path.join(build, "tidy"), exist_ok=True)
    with open(os.path.join(build, "tidy", "compile_commands.json"), "w") as db:
        json.dump(entries, db, indent=1)

    commands = {e["file"]: e for e in entries}
    setup = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    with open(".clang-tidy", "rb") as config:
        setup += config.read()
    root = os.getcwd().encode()

    def key(path):
        entry = commands[path]
        done = subprocess.run(preprocess_command(entry["command"]), cwd=entry["directory"],
                              capture_output=True)
        # A file that does not preprocess gets a key no clean run can have recorded.
        text = done.stdout if done.returncode == 0 else b"failed: " + done.stderr
        # Paths relative to the checkout (as ccache's CCACHE_BASEDIR), so that a clone in another
        # folder (CI's) finds what an earlier run recorded.
        command = entry["command"].encode().replace(root, b".")
        return hashlib.sha256(setup + command + text.replace(root, b".")).hexdigest()

    files = [f for f in wanted if f in commands]  # a part left out of this build is skipped
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for path, digest in zip(files, pool.map(key, files)):
            print(digest, path)


if __name__ == "__main__":
    main()
