"""The refusals of a group's lifecycle requests (design §17.2): each a 409 with its own code, naming the field."""

from heteroflow_site.errors import Conflict


class GroupStopped(Conflict):
    """The group was stopped: it takes no scale, update or second stop."""

    code = "group_stopped"


class WindowActive(Conflict):
    """A scheduling window's action holds the group's replica count: a scale now would be undone."""

    code = "window_active"


class RolloutInProgress(Conflict):
    """The group is rolling out (or back) a revision: one rollout at a time."""

    code = "rollout_in_progress"


class NotAService(Conflict):
    """Only inference groups scale, roll out and serve endpoints; a training gang is placed whole as submitted."""

    code = "not_inference"


class NoChange(Conflict):
    """The update names the image, command and env the group already runs."""

    code = "no_change"
