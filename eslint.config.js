'use strict'
// The JS lint (`npm run lint`): ESLint's recommended rules over the JS face, the command, the
// benchmarks, the examples and the tests. Formatting is left alone (the sources follow one style).

const js = require('@eslint/js')
const globals = require('globals')

module.exports = [
  { ignores: ['binding.js', 'binding.d.ts', 'target/**', 'npm/**', 'node_modules/**', '**/*.ts', '**/*.mts'] },
  js.configs.recommended,
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { ecmaVersion: 2024, sourceType: 'commonjs', globals: { ...globals.node } },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { ...globals.node } },
  },
  {
    rules: {
      // `catch {}` and `_`-prefixed names are how the sources say "deliberately unused".
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
]
