/**
 * A workflow interceptor of the workflow tests' bundle only (support.ts): a timer that a workflow
 * stops waiting for (a `condition` whose predicate came true before its timeout, the usual case) is
 * left to run out instead of being cancelled, so the workflows under test never send a CancelTimer
 * command.
 *
 * Why: Temporal's time-skipping test server refuses a CancelTimer for a timer that fired, in wall
 * time, while the workflow task that cancels it ran, and then never hands that workflow a task again
 * (sdk-java#3088; the real server drops the buffered fire and records the cancel). No timing of the
 * fakes can rule that out: the server's clock runs at wall speed while a task is in flight, and a
 * loaded machine can make a task last longer than any timer the workflows keep. Without CancelTimer
 * commands the refusal has nothing to act on.
 *
 * What the workflow code sees is unchanged: the wait rejects with the scope's cancellation at the
 * same point as before, and the wait it was part of ends the same way. The timer fires later into a
 * completion nobody awaits (one extra workflow task that changes nothing), or is dropped with the
 * run. Histories differ from production's there (a TimerFired instead of a TimerCanceled); what the
 * workflows do, which is what the scenarios check, does not. support.ts checks every history of a
 * scenario for a TimerCanceled, so a change of the SDK that bypassed this would be seen.
 */
import { CancellationScope, type TimerInput, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      startTimer(input: TimerInput, next: (input: TimerInput) => Promise<void>): Promise<void> {
        const scope = CancellationScope.current();
        // Nothing could cancel it, or it is cancelled already (the SDK then starts no timer at all).
        if (!scope.cancellable || scope.consideredCancelled) return next(input);
        const timer = CancellationScope.nonCancellable(() => next(input));
        return new Promise<void>((resolve, reject) => {
          timer.then(resolve, reject);
          scope.cancelRequested.catch(reject);
        });
      },
    },
  ],
});
