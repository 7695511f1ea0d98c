import type { CommandModule } from 'yargs';
import { jobSchema } from '../../pipeline/job-schema.js';

export const schemaCommand: CommandModule = {
  command: 'schema',
  describe: 'Print the JSON Schema of job files (for editors: "$schema": "./job.schema.json")',
  builder: (y) => y.example('$0 schema > jobs/job.schema.json', 'Regenerate the schema shipped beside the jobs'),
  handler: () => {
    process.stdout.write(JSON.stringify(jobSchema(), null, 2) + '\n');
  },
};
