// Build: the package (dist/esm + dist/cjs, with declarations) and the tests and tools (build/), with tsc.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const only = process.argv[2]; // "dist" or "build" or nothing (both)
if (only !== "build") {
  rmSync(join(root, "dist"), { recursive: true, force: true });
  for (const project of ["tsconfig.esm.json", "tsconfig.cjs.json"]) {
    execFileSync(process.execPath, [tsc, "-p", join(root, project)], { stdio: "inherit" });
  }
  mkdirSync(join(root, "dist", "cjs"), { recursive: true });
  writeFileSync(join(root, "dist", "cjs", "package.json"), '{"type": "commonjs"}\n');
}
if (only !== "dist") {
  rmSync(join(root, "build"), { recursive: true, force: true });
  execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.json")], { stdio: "inherit" });
}
