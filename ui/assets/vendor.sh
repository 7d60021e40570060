#!/bin/sh
# Fetches the dashboard's front-end libraries from npm at the versions of
# package.json and copies their built files into ../static/vendor, which the
# Go package embeds. Run it after changing a version (go generate ./ui); the
# copies are committed so that building Spool never needs npm.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp package.json "$tmp/"
(cd "$tmp" && npm install --no-audit --no-fund --ignore-scripts --silent)
out=../static/vendor
mkdir -p "$out"
cp "$tmp/node_modules/htmx.org/dist/htmx.min.js" "$out/htmx.min.js"
cp "$tmp/node_modules/uplot/dist/uPlot.iife.min.js" "$out/uPlot.iife.min.js"
cp "$tmp/node_modules/uplot/dist/uPlot.min.css" "$out/uPlot.min.css"
cp "$tmp/node_modules/htmx.org/LICENSE" "$out/htmx.LICENSE"
cp "$tmp/node_modules/uplot/LICENSE" "$out/uPlot.LICENSE"
(cd "$tmp/node_modules" && node -e 'for (const p of ["htmx.org","uplot"]) console.log(p, require("./"+p+"/package.json").version)') > "$out/VERSIONS"
