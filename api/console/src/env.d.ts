// Stylesheets imported for Vite, which emits them as files.
declare module '*.css';
