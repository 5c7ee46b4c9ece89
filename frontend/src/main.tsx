// Development entry (`npm run dev` only; not part of the bundle): the plugin routes are reached
// through Vite's proxy to a running TensorBoard, at the same path TensorBoard serves them.
import { render } from './index'

render({ baseUrl: new URL('/data/plugin/torch_prof/', window.location.href).toString() })
