import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'

// `npm run build` writes ONE ES module, ../tb_plugin/static/index.js, exporting render().
// The CSS is imported with `?inline` and injected by render(), so no other file is emitted.
// No hashes, no timestamps: the same sources give a byte-identical bundle (CI diffs it).
//
// `npm run dev` serves index.html (src/main.tsx) and proxies /data to a running TensorBoard
// (TB_URL, default http://127.0.0.1:6006) so the app talks to the real plugin routes.
export default defineConfig({
  plugins: [react()],
  define: {
    'process.env.NODE_ENV': JSON.stringify(process.env.NODE_ENV === 'development' ? 'development' : 'production'),
  },
  server: {
    proxy: { '/data': { target: process.env.TB_URL ?? 'http://127.0.0.1:6006', changeOrigin: true } },
  },
  build: {
    outDir: '../tb_plugin/static',
    emptyOutDir: true,
    target: 'es2020',
    sourcemap: false,
    minify: true,
    copyPublicDir: false,
    reportCompressedSize: true,
    lib: {
      entry: 'src/index.tsx',
      formats: ['es'],
      fileName: () => 'index.js',
    },
    rolldownOptions: {
      output: {
        codeSplitting: false,
        minify: true,
        comments: { legal: false, annotation: false, jsdoc: false },
      },
    },
  },
})
