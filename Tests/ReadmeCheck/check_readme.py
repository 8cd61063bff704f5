#!/usr/bin/env python3
"""The README is a contract: every ```swift block of README.md compiles as written.

Each block is type-checked on its own, as the top-level code of a `main.swift` (so it may mix declarations and
statements, and use `try await` at the top level), against the modules of the package's debug build. Its import
is the one its section promises: `import Curlew` alone under "Routes and providers", the library and its
companions under "The upload library" and "The load-generation library", `import CurlewEngine` alone elsewhere. Names a snippet uses without declaring them (`url`, `logger`, `User`, ...) come from
StandIns.swift, a second file of the same module, only for the names the block really uses.

A block that is not Curlew code (another library's API, for comparison) is preceded by the marker
`<!-- readme-check: skip (why) -->`; a marker without a reason is an error.

    Tests/ReadmeCheck/check_readme.py [--build-dir .build/debug] [--jobs 2]
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MARKER = re.compile(r"<!--\s*readme-check:\s*(.*?)\s*-->")
# The modules a section's blocks import; the library sections import what a program using that library would.
SECTION_IMPORTS = {
    "Routes and providers": ["Curlew"],
    "The upload library": ["CurlewUpload", "CurlewS3", "CurlewSharding", "CurlewEngine"],
    "The load-generation library": ["CurlewLoad", "CurlewLoadPrometheus", "CurlewSharding", "CurlewEngine"],
}
DEFAULT_IMPORT = ["CurlewEngine"]


def blocks(readme):
    """(first line number, section, marker, code) for every ```swift block."""
    section, marker, found = "", None, []
    lines = readme.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:].strip()
        match = MARKER.search(line)
        if match:
            marker = match.group(1)
        elif line.strip() == "```swift":
            start = index + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            found.append((start + 1, section, marker, "\n".join(lines[start:end]) + "\n"))
            marker, index = None, end
        elif line.strip():
            marker = None
        index += 1
    return found


def stand_ins():
    """name -> Swift declaration, from the `// MARK: name` sections of StandIns.swift."""
    text = (HERE / "StandIns.swift").read_text()
    sections = re.split(r"^// MARK: (\w+)\n", text, flags=re.M)
    header, pairs = sections[0], sections[1:]
    return header, {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}


def declares(code, name):
    return re.search(rf"\b(let|var|struct|enum|class|actor|func|protocol|typealias)\s+{name}\b", code) is not None


def compiler_flags(build_dir):
    modules = build_dir / "Modules"
    flags = ["-I", str(modules if modules.is_dir() else build_dir), "-I", str(ROOT / "CLibCurl")]
    # C modules of the dependencies (CYaml, the NIO shims, ...) that the Swift modules refer to.
    for module_map in sorted(build_dir.glob("*.build/module.modulemap")):
        flags += ["-Xcc", f"-fmodule-map-file={module_map}"]
    for include in sorted(ROOT.glob(".build/checkouts/*/Sources/*/include")):
        flags += ["-Xcc", f"-I{include}"]
    return flags


def check(job):
    line, directory, flags, preamble = job
    result = subprocess.run(
        ["swiftc", "-typecheck", "-swift-version", "6", *flags, "main.swift", "StandIns.swift"],
        cwd=directory, capture_output=True, text=True)
    return line, directory, preamble, result.returncode, result.stdout + result.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default=str(ROOT / ".build" / "debug"))
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args()
    build_dir = Path(options.build_dir).resolve()
    if not (build_dir / "Modules" / "Curlew.swiftmodule").exists() and not (build_dir / "Curlew.swiftmodule").exists():
        sys.exit(f"check_readme: no Curlew module under {build_dir}; run `swift build --build-tests` first")

    header, names = stand_ins()
    scratch = ROOT / ".build" / "readme-check"
    shutil.rmtree(scratch, ignore_errors=True)
    flags = compiler_flags(build_dir)
    jobs, skipped, failures = [], 0, []
    for line, section, marker, code in blocks((ROOT / "README.md").read_text()):
        if marker is not None:
            if not re.fullmatch(r"skip \(.+\)", marker):
                failures.append(f"README.md:{line}: marker `{marker}` is not `skip (reason)`")
            skipped += 1
            continue
        modules = SECTION_IMPORTS.get(section, DEFAULT_IMPORT)
        directory = scratch / f"line-{line}"
        directory.mkdir(parents=True)
        used = [name for name in names if re.search(rf"\b{name}\b", code) and not declares(code, name)]
        imports = "".join(f"import {module}\n" for module in modules)
        (directory / "main.swift").write_text(f"{imports}// README.md line {line}\n{code}")
        (directory / "StandIns.swift").write_text(header + "".join(names[name] for name in used))
        jobs.append((line, directory, flags, len(modules) + 1))

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        for line, directory, preamble, status, output in pool.map(check, jobs):
            if status != 0:
                # main.swift is the block after its imports and a comment: point at README.md itself.
                shown = re.sub(
                    r"(?:\S*/)?main\.swift:(\d+):(\d+)",
                    lambda match: f"README.md:{line + int(match.group(1)) - preamble - 1}:{match.group(2)}", output)
                failures.append(f"README.md:{line}: the block does not compile (scratch: {directory})\n{shown}")
    print(f"check_readme: {len(jobs)} Swift blocks type-checked, {skipped} marked as not Curlew code")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
