import os
import threading

from scheduling.what_if.low_priority import at_low_priority


def test_a_forked_child_gets_its_own_low_priority_worker():
    assert at_low_priority(lambda: 6 * 7) == 42  # the parent's worker thread is running now
    child = os.fork()
    if child == 0:
        answers = []
        asking = threading.Thread(target=lambda: answers.append(at_low_priority(lambda: 6 * 7)), daemon=True)
        asking.start()
        asking.join(30)
        os._exit(0 if answers == [42] else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
