import { defineConfig } from 'vitest/config'

// `npm test`: unit tests of the pure modules (src/**/*.test.ts, next to the code they test), run
// headless in Node with no browser and no network. A separate config from vite.config.ts so the
// tests load neither the React plugin nor the library build settings.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
})
