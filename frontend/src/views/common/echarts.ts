// The extra ECharts pieces the Memory, Distributed, Module and Diff views use, registered on the
// shared (tree-shaken) instance of src/charts/echarts.ts. Importing this module is enough.
import { LineChart } from 'echarts/charts'
import { DataZoomInsideComponent, DataZoomSliderComponent, MarkLineComponent, MarkPointComponent } from 'echarts/components'
import { echarts } from '../../charts/echarts'

echarts.use([LineChart, DataZoomInsideComponent, DataZoomSliderComponent, MarkLineComponent, MarkPointComponent])

export { echarts }
