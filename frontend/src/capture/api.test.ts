import { describe, expect, it } from 'vitest'
import { answerText, type WorkerAnswer } from './api'

const base: WorkerAnswer = { id: 'a1', worker: 'host_1', rank: null, state: 'accepted', step: 0, steps: 3, files: [], reason: '', notes: [], updated_at: 0 }

describe('answerText', () => {
  it('says each state as the CLI does', () => {
    expect(answerText(base)).toBe('accepted')
    expect(answerText({ ...base, state: 'recording', step: 2 })).toBe('recording step 2 of 3')
    expect(answerText({ ...base, state: 'written', files: ['w.1.pt.trace.json.gz', 'w.1.snapshot.pickle'] })).toBe(
      'written: w.1.pt.trace.json.gz, w.1.snapshot.pickle',
    )
    expect(answerText({ ...base, state: 'failed', reason: 'the profiler did not start' })).toBe('failed: the profiler did not start')
  })
  it('adds the notes', () => {
    expect(answerText({ ...base, state: 'written', files: ['t'], notes: ['no memory snapshot: CUDA is not available'] })).toBe(
      'written: t (no memory snapshot: CUDA is not available)',
    )
  })
})
