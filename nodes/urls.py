from django.urls import path

from nodes import views

urlpatterns = [
    path("nodes/", views.node_list, name="node-list"),
    path("nodes/<int:node_id>/", views.node_page, name="node-detail"),
]
