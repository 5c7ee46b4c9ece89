// `npm run lint` (CI runs it): typescript-eslint's recommended rules plus the React hooks rules,
// on the sources only (the bundle and the generated API types are not ours to style).
import js from '@eslint/js'
import reactHooks from 'eslint-plugin-react-hooks'
import globals from 'globals'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['dist', 'node_modules', 'src/api/generated.ts'] },
  {
    files: ['**/*.{ts,tsx,js,mjs}'],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: { ecmaVersion: 2022, globals: { ...globals.browser, ...globals.node } },
    plugins: { 'react-hooks': reactHooks },
    rules: {
      // The two classic hook rules; the React Compiler rules of `recommended` (refs during
      // render, setState in effects) flag patterns this code uses on purpose (no compiler here).
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // Requests go through the typed client (src/api/index.ts: `request`, `csvUrl`,
      // `routeLink`, `requestUrl`, `submit`), so a route's options are the contract's.
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/api/http'], message: 'Use the typed client of src/api (request, csvUrl, routeLink, requestUrl, submit).' }] }],
    },
  },
  {
    files: ['src/api/**'],
    rules: { 'no-restricted-imports': 'off' },
  },
)
