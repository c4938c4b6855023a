import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'generated/', '.gantry/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no clocks, randomness or I/O.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-globals': ['error', 'setInterval', 'fetch'],
      'no-restricted-syntax': [
        'error',
        { selector: "MemberExpression[object.name='Date'][property.name='now']", message: 'Use workflow time (Date is replaced in workflows, but be explicit with sleep/condition).' },
        { selector: "MemberExpression[object.name='Math'][property.name='random']", message: 'Use uuid4() or workflow-safe randomness from @temporalio/workflow.' },
      ],
      'no-restricted-imports': ['error', { patterns: ['node:*', 'fs', 'pg', '@prisma/*', '../activities/*.js', '../api/*', '../infra/*'] }],
    },
  },
);
