import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'generated/', '.gantry/', 'coverage/', 'cli/dist/', 'cli/python/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflow code (and contracts/, bundled with it) runs in Temporal's deterministic sandbox, where Date and Math.random are replaced
    // with replay-safe versions; what must never appear there is I/O of any kind.
    files: ['workflows/**/*.ts', 'contracts/**/*.ts'],
    rules: {
      'no-restricted-globals': ['error', 'setInterval', 'fetch', 'process'],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'pg', '@prisma/*', '../generated/*', '../infra/*', '../api/*'],
              message: 'no I/O in workflow code',
            },
            {
              group: ['../activities/*'],
              allowTypeImports: true,
              message: 'workflows reach activities through proxyActivities only',
            },
          ],
        },
      ],
    },
  },
);
