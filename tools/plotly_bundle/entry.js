// plotly.js's core (which brings the scatter trace) and the two other trace kinds kvviz's figures
// use: the partial bundle plotly.js documents ("Modules" in its README). tests/test_plotly_js.py
// fails when a figure builder starts using a kind that is not registered here.
'use strict';

var Plotly = require('plotly.js/lib/core');

Plotly.register([
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/heatmap'),
]);

module.exports = Plotly;
