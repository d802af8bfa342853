// Build: the package (dist/esm + dist/cjs, with declarations) and the tests and tools (build/), with tsc.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const only = process.argv[2]; // "dist" or "build" or nothing (both)

function compile(project) {
  try {
    execFileSync(process.execPath, [tsc, "-p", join(root, project)], { stdio: "inherit" });
  } catch {
    console.error(`build: tsc -p ${project} failed`);
    process.exit(1);
  }
}

if (only !== "build") {
  rmSync(join(root, "dist"), { recursive: true, force: true });
  compile("tsconfig.esm.json");
  compile("tsconfig.cjs.json");
  mkdirSync(join(root, "dist", "cjs"), { recursive: true });
  writeFileSync(join(root, "dist", "cjs", "package.json"), '{"type": "commonjs"}\n');
}
if (only !== "dist") {
  rmSync(join(root, "build"), { recursive: true, force: true });
  compile("tsconfig.json");
}
