from django.urls import path

from nodes import views

urlpatterns = [
    path("nodes/", views.node_list, name="node-list"),
    # A node's page lists the tasks on its cards: its route is in scheduling.web.urls, which hands it the reader.
]
