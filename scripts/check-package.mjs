#!/usr/bin/env node
// The package as a user meets it: packs taskloop (dist/ must be built), installs the tarball
// into a fresh project from the registry, and for each zod version a user may have (the peer
// range's ends) typechecks examples/ against the installed declarations with
// skipLibCheck: false and runs every example. Exits 1 naming the step that failed.
//
// Speed: one install per run, into one project; each further zod version is one more
// `npm install zod@…`. better-sqlite3 is installed with --ignore-scripts and given the
// repository's own build of the same version (same Node, same ABI) instead of compiling it
// from source again (about a minute); a different version is rebuilt. Installs prefer npm's
// cache (`--prefer-offline`: what `npm ci` just fetched is not asked for again; what is not
// cached still comes from the registry): the install went from 30 s to 9 s here.
//
//   node scripts/check-package.mjs            # TASKLOOP_CHECK_ZOD=~3.25.0,^4 to choose versions
//   TASKLOOP_CHECK_KEEP=1 …                   # keep the temporary project and print its path
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const ZODS = (process.env.TASKLOOP_CHECK_ZOD ?? '~3.25.0,^4.0.0').split(',').map((s) => s.trim()).filter(Boolean);
/** Run in this order: the store first (no threads), the daemon last (it loads the tools module and the plugin). */
const EXAMPLES = ['store', 'worker', 'mcp', 'daemon'];
const NATIVE = join('node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');

const started = Date.now();
const say = (line) => process.stdout.write(`check-package [${((Date.now() - started) / 1000).toFixed(1)}s] ${line}\n`);

function fail(step, detail = '') {
  process.stderr.write(`check-package: FAILED at ${step}${detail === '' ? '' : `\n${detail.trimEnd()}`}\n`);
  process.exit(1);
}

function run(step, cmd, args, cwd) {
  const res = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' }, maxBuffer: 64 * 1024 * 1024 });
  if (res.error !== undefined) fail(step, res.error.message);
  if (res.status !== 0) fail(step, `${cmd} ${args.join(' ')} exited ${res.status ?? res.signal}\n${res.stdout}\n${res.stderr}`);
  return res.stdout;
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const version = (dir, name) => {
  const file = join(dir, 'node_modules', name, 'package.json');
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).version : undefined;
};

if (!existsSync(join(root, 'dist', 'index.js')) || !existsSync(join(root, 'dist', 'index.d.ts'))) fail('dist', 'dist/ is not built: run npm run build first');
if (ZODS.length === 0) fail('options', 'TASKLOOP_CHECK_ZOD names no zod version');

const tmp = mkdtempSync(join(tmpdir(), 'taskloop-package-'));
try {
  // 1. The tarball, as `npm publish` would make it (dist/ is already built, so no prepare).
  const packed = JSON.parse(run('npm pack', npm, ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], root));
  const tarball = join(tmp, packed[0].filename);
  const files = packed[0].files.map((f) => f.path);
  for (const entry of Object.values(pkg.exports)) {
    for (const target of typeof entry === 'string' ? [entry] : Object.values(entry)) {
      if (!files.includes(target.replace(/^\.\//, ''))) fail('npm pack', `the exports map names ${target}, which the tarball does not hold`);
    }
  }
  say(`packed ${packed[0].filename}: ${files.length} files, ${(packed[0].size / 1024).toFixed(0)} KiB`);
  // Installing the package must run nothing of taskloop's own (npm's allow-scripts would
  // name it): dist/ is built at pack time (prepack), never at install time.
  const installTime = ['preinstall', 'install', 'postinstall', 'prepare'].filter((s) => pkg.scripts?.[s] !== undefined);
  if (installTime.length > 0) fail('package.json', `install-time scripts ${installTime.join(', ')}: installing taskloop would run them`);

  // 2. A fresh project with the examples.
  const project = join(tmp, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'taskloop-package-check', private: true, type: 'module' }, null, 2));
  for (const file of readdirSync(join(root, 'examples'))) {
    if (file.endsWith('.ts') || file.endsWith('.json')) copyFileSync(join(root, 'examples', file), join(project, file));
  }

  const dev = pkg.devDependencies;
  const install = (step, specs) => run(step, npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts', '--omit=optional', ...specs], project);
  install('npm install', [tarball, `zod@${ZODS[0]}`, `typescript@${dev.typescript}`, `@types/node@${dev['@types/node']}`]);
  say(`installed the tarball with zod ${version(project, 'zod')}`);

  const native = () => {
    if (existsSync(join(project, NATIVE))) return;
    if (version(project, 'better-sqlite3') === version(root, 'better-sqlite3') && existsSync(join(root, NATIVE))) {
      mkdirSync(dirname(join(project, NATIVE)), { recursive: true });
      copyFileSync(join(root, NATIVE), join(project, NATIVE));
    } else {
      say(`building better-sqlite3 ${version(project, 'better-sqlite3')} from source (the repository has another version)`);
      run('npm rebuild better-sqlite3', npm, ['rebuild', 'better-sqlite3'], project);
    }
  };

  for (const [i, zod] of ZODS.entries()) {
    if (i > 0) install(`npm install zod@${zod}`, [`zod@${zod}`]);
    native();
    const installed = version(project, 'zod');
    rmSync(join(project, 'out'), { recursive: true, force: true });
    for (const config of ['tsconfig.json', 'tsconfig.mcp.json']) {
      run(`tsc -p ${config} (skipLibCheck: false) with zod ${installed}`, process.execPath, [join(project, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', config], project);
    }
    const ran = [];
    for (const example of EXAMPLES) {
      const out = run(`examples/${example}.ts with zod ${installed}`, process.execPath, [join('out', `${example}.js`)], project);
      if (!out.split('\n').some((line) => line.startsWith(`ok ${example}`))) fail(`examples/${example}.ts with zod ${installed}`, `no "ok ${example}" line in its output:\n${out}`);
      ran.push(example);
    }
    say(`zod ${installed}: tsc clean (skipLibCheck: false); ran ${ran.join(', ')}`);
  }
  say(`package check passed for zod ${ZODS.join(', ')}`);
} finally {
  if (process.env.TASKLOOP_CHECK_KEEP === '1') say(`kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
