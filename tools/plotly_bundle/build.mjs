// Build static/plotly-kvviz-<version>.min.js with esbuild, the way plotly.js builds its own
// bundles (its esbuild-config.js: an IIFE with the global Plotly, NODE_DEBUG off, es2016), minified.
// Run: cd tools/plotly_bundle && npm ci && npm run build
import * as esbuild from 'esbuild';
import { environmentPlugin } from 'esbuild-plugin-environment';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { version } = require('plotly.js/package.json');
const outfile = `../../static/plotly-kvviz-${version}.min.js`;

await esbuild.build({
    entryPoints: ['entry.js'],
    outfile,
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    legalComments: 'eof',          // keep the dependencies' licence notices
    banner: {
        js: `/*! plotly.js v${version} (kvviz - minified: core with scatter, bar, heatmap), ` +
            'built by tools/plotly_bundle. Copyright 2012-2026, Plotly, Inc. MIT license */',
    },
    plugins: [environmentPlugin({ NODE_DEBUG: false })],
    loader: { '.css': 'empty' },   // maplibre's stylesheet, required only by map traces (not bundled)
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'info',
});
console.log(`built ${outfile}`);
