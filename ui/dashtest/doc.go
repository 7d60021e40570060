// Package dashtest holds the dashboard's end-to-end tests: its pages and
// actions on every store (SQLite, PostgreSQL, MySQL) and in a browser. It is
// a module of its own so that the ui module requires no backend and no
// browser driver: an application that imports ui pulls only what it uses.
package dashtest
