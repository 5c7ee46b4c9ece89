// The global stylesheet, one string in cascade order; the views' own rules live with each view
// (views/<name>/<name>.css, injected by useViewStyle). Imported with `?inline` so the bundle
// stays one JS file.
import base from './base.css?inline'
import capture from './capture.css?inline'
import controls from './controls.css?inline'
import feedback from './feedback.css?inline'
import noRuns from './no-runs.css?inline'
import sidebar from './sidebar.css?inline'
import tables from './tables.css?inline'

export const globalCss = [base, controls, sidebar, feedback, tables, noRuns, capture].join('\n')
