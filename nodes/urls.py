from django.urls import path

from nodes import join_views

urlpatterns = [
    path("nodes/add/", join_views.node_add, name="node-add"),
    # The node list counts fractional tasks' shares and a node's page lists the tasks on its cards: their routes
    # are in scheduling.web.urls, which hands them the readers.
]
