// Build: the package (dist/esm + dist/cjs, with declarations) and the tests and tools (build/), with tsc.
// dist/ is committed, so `npm install <this folder>` works without a build; `node scripts/build.mjs check` fails
// when dist/ is not what the sources build to (make test-ts runs it).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const only = process.argv[2]; // "dist", "build", "check" or nothing (dist and build)

function compile(project, outDir) {
  try {
    execFileSync(process.execPath, [tsc, "-p", join(root, project), ...(outDir ? ["--outDir", outDir] : [])], { stdio: "inherit" });
  } catch {
    console.error(`build: tsc -p ${project} failed`);
    process.exit(1);
  }
}

function buildDist(dist) {
  rmSync(dist, { recursive: true, force: true });
  compile("tsconfig.esm.json", join(dist, "esm"));
  compile("tsconfig.cjs.json", join(dist, "cjs"));
  mkdirSync(join(dist, "cjs"), { recursive: true });
  writeFileSync(join(dist, "cjs", "package.json"), '{"type": "commonjs"}\n');
}

function files(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath ?? e.path, e.name))).sort();
}

if (only === "check") {
  const fresh = mkdtempSync(join(tmpdir(), "hw-dist-"));
  try {
    buildDist(fresh);
    const want = files(fresh);
    const have = files(join(root, "dist"));
    const stale = [...new Set([...want, ...have])].filter((f) => !want.includes(f) || !have.includes(f) ||
      !readFileSync(join(fresh, f)).equals(readFileSync(join(root, "dist", f))));
    if (stale.length > 0) {
      console.error(`build check: dist/ is not the build of src/ (${stale.slice(0, 5).join(", ")}${stale.length > 5 ? ", ..." : ""}); ` +
        "run `node scripts/build.mjs dist` and commit dist/");
      process.exit(1);
    }
    console.log(`build check: dist/ is the build of src/ (${want.length} files)`);
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
} else {
  if (only !== "build") buildDist(join(root, "dist"));
  if (only !== "dist") {
    rmSync(join(root, "build"), { recursive: true, force: true });
    compile("tsconfig.json");
  }
}
