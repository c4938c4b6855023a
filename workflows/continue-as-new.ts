/**
 * How Gantry's long-lived workflows continue as new. Each keeps its whole run state (signals and
 * updates that arrived but were not acted on yet included) in one object that its handlers write
 * and that is handed, whole, to the next run: nothing a handler recorded can be lost between runs.
 */
import { workflowInfo } from '@temporalio/workflow';

/**
 * Options for workflow tests only (test/workflows). They live in the run input types of the
 * workflow files, never in the contracts (contracts/workflows.ts) that the domain starts
 * workflows with, and no API request reaches a workflow's input.
 */
export interface RunTestOptions {
  /** 'step': continue as new after every step of the main loop, to prove that nothing is lost across. */
  continueAsNewEvery?: 'step';
}

/**
 * Whether the run should continue as new now: Temporal suggests it (history size), or a test asks
 * for it after every step. `stepsThisRun` is for loops that look before their step: a run that has
 * not taken one yet does not continue, or it would never get anywhere.
 */
export function continueAsNewDue(test: RunTestOptions | undefined, stepsThisRun = 1): boolean {
  return workflowInfo().continueAsNewSuggested || (test?.continueAsNewEvery === 'step' && stepsThisRun > 0);
}
