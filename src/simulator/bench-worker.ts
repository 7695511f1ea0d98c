// Runs a simulator in a worker thread so a benchmark client in the main thread does not share its event loop.

import { parentPort, workerData } from 'node:worker_threads';
import { startSimulator, type SimulatorOptions } from './index.js';

const sim = await startSimulator(workerData as SimulatorOptions);
parentPort!.postMessage({ mainnet: sim.urls.mainnet, apiKey: sim.apiKey, whale: sim.examples.whale });
parentPort!.on('message', (m) => {
  if (m === 'close') void sim.close().then(() => parentPort!.close());
});
