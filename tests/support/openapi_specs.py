"""OpenAPI specifications written for the tests (no third-party text): a petstore-like 3.0 spec in
YAML, a Swagger 2.0 spec in JSON, a 3.1 spec with recursive `$ref`s, and a generator of large specs."""

from __future__ import annotations

import json
from typing import Any

PETSTORE_30 = """\
openapi: 3.0.3
info:
  title: Harbour Petstore
  version: 1.4.0
  description: Adopt, list and look after the pets of the harbour shelter.
  license:
    name: MIT
servers:
  - url: https://pets.example.test/v1
    description: Production
  - url: https://{region}.pets.example.test/v1
    variables:
      region:
        default: eu
        enum: [eu, us]
tags:
  - name: pets
    description: Everything about the shelter's pets.
  - name: store
    description: Orders for pet food.
paths:
  /pets:
    get:
      tags: [pets]
      summary: List all pets
      operationId: listPets
      parameters:
        - name: limit
          in: query
          description: How many pets to return at one time (max 100).
          required: false
          schema:
            type: integer
            format: int32
            maximum: 100
          example: 20
        - $ref: '#/components/parameters/Species'
      responses:
        '200':
          description: A paged array of pets
          headers:
            x-next:
              description: A link to the next page of responses
              schema:
                type: string
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Pets'
        default:
          $ref: '#/components/responses/Error'
    post:
      tags: [pets]
      summary: Create a pet
      description: Register a new pet with the shelter so it can be adopted.
      operationId: createPet
      requestBody:
        required: true
        content:
          application/json:
            schema:
              $ref: '#/components/schemas/NewPet'
            examples:
              kitten:
                summary: A young cat
                value: {name: Marmalade, species: cat, birthday: '2024-03-01'}
      responses:
        '201':
          description: The pet was created
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Pet'
        default:
          $ref: '#/components/responses/Error'
  /pets/{petId}:
    parameters:
      - name: petId
        in: path
        required: true
        description: The id of the pet to retrieve
        schema:
          type: string
    get:
      tags: [pets]
      summary: Info for a specific pet
      operationId: showPetById
      responses:
        '200':
          description: Expected response to a valid request
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Pet'
              example: {id: 7, name: Biscuit, species: dog, status: available}
    delete:
      tags: [pets]
      summary: Remove a pet
      operationId: deletePet
      deprecated: true
      responses:
        '204':
          description: Removed
  /store/orders:
    post:
      tags: [store]
      summary: Order pet food
      operationId: placeOrder
      requestBody:
        content:
          application/json:
            schema:
              type: object
              required: [sku, quantity]
              properties:
                sku: {type: string, description: Stock keeping unit of the food bag}
                quantity: {type: integer, minimum: 1}
      responses:
        '200':
          description: Order placed
components:
  parameters:
    Species:
      name: species
      in: query
      description: Only pets of this species.
      schema:
        $ref: '#/components/schemas/Species'
  responses:
    Error:
      description: Unexpected error
      content:
        application/json:
          schema:
            $ref: '#/components/schemas/Error'
  schemas:
    Species:
      type: string
      enum: [cat, dog, parrot, tortoise]
    NewPet:
      type: object
      required: [name, species]
      properties:
        name:
          type: string
          description: The pet's given name.
          example: Marmalade
        species:
          $ref: '#/components/schemas/Species'
        birthday:
          type: string
          format: date
    Pet:
      allOf:
        - $ref: '#/components/schemas/NewPet'
        - type: object
          required: [id]
          properties:
            id:
              type: integer
              format: int64
              description: Unique id assigned by the shelter.
            status:
              type: string
              description: Adoption status
              enum: [available, pending, adopted]
    Pets:
      type: array
      items:
        $ref: '#/components/schemas/Pet'
    Error:
      type: object
      required: [code, message]
      properties:
        code: {type: integer, format: int32}
        message: {type: string}
"""

SWAGGER_20: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "Lighthouse Logbook", "version": "2.1"},
    "host": "logbook.example.test",
    "basePath": "/api",
    "schemes": ["https"],
    "consumes": ["application/json"],
    "produces": ["application/json"],
    "securityDefinitions": {"api_key": {"type": "apiKey", "name": "X-Keeper-Key", "in": "header"}},
    "tags": [{"name": "entries", "description": "Log entries of the keepers."}],
    "paths": {
        "/entries": {
            "get": {
                "tags": ["entries"],
                "summary": "List log entries",
                "operationId": "listEntries",
                "parameters": [
                    {
                        "name": "since",
                        "in": "query",
                        "type": "string",
                        "format": "date-time",
                        "description": "Only entries after this time.",
                    },
                    {"name": "weather", "in": "query", "type": "string", "enum": ["fog", "gale", "calm"]},
                ],
                "responses": {
                    "200": {
                        "description": "The entries",
                        "schema": {"type": "array", "items": {"$ref": "#/definitions/Entry"}},
                        "examples": {"application/json": [{"id": 1, "text": "Lamp trimmed at dusk."}]},
                    }
                },
                "security": [{"api_key": []}],
            },
            "post": {
                "tags": ["entries"],
                "summary": "Write a log entry",
                "operationId": "addEntry",
                "parameters": [
                    {
                        "name": "entry",
                        "in": "body",
                        "required": True,
                        "description": "The entry to append.",
                        "schema": {"$ref": "#/definitions/Entry"},
                    }
                ],
                "responses": {"201": {"description": "Written"}},
            },
        },
        "/keepers/{keeperId}/photo": {
            "put": {
                "tags": ["keepers"],
                "summary": "Upload a keeper's photo",
                "consumes": ["multipart/form-data"],
                "parameters": [
                    {"name": "keeperId", "in": "path", "required": True, "type": "integer"},
                    {"name": "photo", "in": "formData", "type": "file", "required": True, "description": "JPEG"},
                ],
                "responses": {"200": {"description": "Stored"}},
            }
        },
    },
    "definitions": {
        "Entry": {
            "type": "object",
            "required": ["text"],
            "properties": {
                "id": {"type": "integer", "readOnly": True},
                "text": {"type": "string", "description": "What happened during the watch."},
                "visibility_nm": {"type": "number", "description": "Visibility in nautical miles."},
            },
        }
    },
}

CYCLES_31: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Family Tree", "version": "0.9"},
    "paths": {
        "/people/{id}": {
            "get": {
                "summary": "Get a person with ancestors",
                "operationId": "getPerson",
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": {
                        "description": "A person",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Person"}}},
                    }
                },
            }
        },
        "/nodes": {
            "get": {
                "summary": "Walk the graph",
                "responses": {
                    "200": {
                        "description": "A node",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NodeA"}}},
                    }
                },
            }
        },
    },
    "components": {
        "schemas": {
            "Person": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "examples": ["Ada"]},
                    "nickname": {"type": ["string", "null"]},
                    "mother": {"$ref": "#/components/schemas/Person"},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Person"}},
                    "home": {"$ref": "common.yaml#/components/schemas/Address"},
                },
            },
            "NodeA": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/NodeB"}}},
            "NodeB": {"type": "object", "properties": {"back": {"$ref": "#/components/schemas/NodeA"}}},
        }
    },
}


def large_spec(resources: int, title: str = "Warehouse Fleet") -> dict[str, Any]:
    """A 3.0 spec with 5 operations per resource (list, create, get, update, delete)."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for index in range(resources):
        name = f"Resource{index}"
        ref = {"$ref": f"#/components/schemas/{name}"}
        json_body = {"content": {"application/json": {"schema": ref}}}
        item_id = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
        tag = [f"group{index % 25}"]
        paths[f"/r{index}"] = {
            "get": {"tags": tag, "summary": f"List {name} items", "responses": {"200": {"description": "ok"}}},
            "post": {"tags": tag, "summary": f"Create a {name}", "requestBody": json_body, "responses": {}},
        }
        paths[f"/r{index}/{{id}}"] = {
            "parameters": [item_id],
            "get": {
                "tags": tag,
                "summary": f"Get one {name}",
                "responses": {"200": {"description": "ok", **json_body}},
            },
            "put": {"tags": tag, "summary": f"Replace a {name}", "requestBody": json_body, "responses": {}},
            "delete": {"tags": tag, "summary": f"Delete a {name}", "responses": {"204": {"description": "gone"}}},
        }
        schemas[name] = {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "integer"},
                "label": {"type": "string", "description": f"Shelf label of item kind {index}."},
                "weight_kg": {"type": "number"},
            },
        }
    return {
        "openapi": "3.0.3",
        "info": {"title": title, "version": "1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def as_json(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=2)
