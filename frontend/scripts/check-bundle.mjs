// Static checks on the built bundle (run after `npm run build`):
//  - tb_plugin/static holds exactly one file, index.js, an ES module exporting render();
//  - no eval / new Function / blob: workers / importScripts;
//  - no absolute http(s) URL other than XML namespaces and React's error-decoder link
//    (text only, never fetched), so nothing can be loaded from the internet at run time;
//    the one exception is the origin of ui.perfetto.dev: the Trace view's "Open in Perfetto"
//    button (src/views/trace/perfetto.ts) opens it in a new tab with window.open and posts the
//    trace to it with that exact target origin. It is only ever used on a click, never fetched.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const staticDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'tb_plugin', 'static')
const problems = []
const files = readdirSync(staticDir, { recursive: true })
if (files.length !== 1 || files[0] !== 'index.js') problems.push(`expected only index.js in tb_plugin/static, found: ${files.join(', ')}`)

const code = readFileSync(join(staticDir, 'index.js'), 'utf8')
if (!/export\s*\{[^}]*\brender\b[^}]*\}/.test(code)) problems.push('index.js does not export render()')
for (const [what, re] of [
  ['eval(', /\beval\s*\(/],
  ['new Function', /new\s+Function\s*\(/],
  ['blob: URL', /["'`]blob:/],
  ['Worker', /new\s+(Shared)?Worker\s*\(/],
  ['importScripts', /importScripts\s*\(/],
]) {
  if (re.test(code)) problems.push(`index.js contains ${what}`)
}
const allowed = [/^http:\/\/www\.w3\.org\//, /^https:\/\/react\.dev\/errors\//, /^https:\/\/ui\.perfetto\.dev(\/#!\/)?$/]
const urls = new Set(code.match(/https?:\/\/[^\s"'`)<>\\]+/g) ?? [])
for (const url of urls) if (!allowed.some((re) => re.test(url))) problems.push(`absolute URL in bundle: ${url}`)

const kib = (code.length / 1024).toFixed(1)
if (problems.length) {
  console.error(`bundle check FAILED (${kib} KiB):\n  ${problems.join('\n  ')}`)
  process.exit(1)
}
console.log(`bundle check ok: tb_plugin/static/index.js, ${kib} KiB, exports render(), no eval/workers/external URLs`)
